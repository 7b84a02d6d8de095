// Capture once per bucket with fixed buffers, as an engine does; replay every batch size through
// the smallest bucket that holds it, with fresh inputs and freshly poisoned outputs each time.
#include "graph_replay.h"

#include <algorithm>

#include "../replay_batches.h"
#include "../verify.h"

namespace dsv4h {
namespace {

class CapturedBucket {
 public:
  CapturedBucket(const Component& component, const Case& c, hipStream_t stream)
      : case_(c),
        inputs_(DeviceTensorMap::upload(component.make_inputs(c))),
        outputs_(DeviceTensorMap::like(component.make_outputs(c))) {
    const std::string what = "graph capture of " + c.str();
    {
      CaptureScope scope(c.str());
      DSV4H_HIP_CHECK(hipStreamBeginCapture(stream, hipStreamCaptureModeGlobal));
      try {
        component.gpu(c, inputs_, outputs_, stream);
      } catch (const std::exception& e) {
        abandon_capture(stream);
        throw std::runtime_error(what + " failed: " + e.what());
      }
      const hipError_t status = hipStreamEndCapture(stream, &graph_);
      if (status != hipSuccess) {
        (void)hipGetLastError();
        throw std::runtime_error(what + " failed at hipStreamEndCapture: " + hipGetErrorName(status) +
                                 " (the launch sequence did something that cannot be captured: a host "
                                 "synchronisation, a synchronous copy or an allocation)");
      }
    }
    DSV4H_HIP_CHECK(hipGraphInstantiate(&exec_, graph_, nullptr, nullptr, 0));
  }
  ~CapturedBucket() {
    if (exec_) (void)hipGraphExecDestroy(exec_);
    if (graph_) (void)hipGraphDestroy(graph_);
  }
  CapturedBucket(const CapturedBucket&) = delete;
  CapturedBucket& operator=(const CapturedBucket&) = delete;

  TensorMap replay(const TensorMap& padded_inputs, const TensorMap& poisoned_outputs, hipStream_t stream) {
    inputs_.upload_into(padded_inputs);
    outputs_.upload_into(poisoned_outputs);
    DSV4H_HIP_CHECK(hipGraphLaunch(exec_, stream));
    DSV4H_HIP_CHECK(hipStreamSynchronize(stream));
    return outputs_.download();
  }

  const Case& bucket_case() const { return case_; }

 private:
  static void abandon_capture(hipStream_t stream) {
    hipGraph_t broken = nullptr;
    (void)hipStreamEndCapture(stream, &broken);
    if (broken) (void)hipGraphDestroy(broken);
    (void)hipGetLastError();
  }

  Case case_;
  DeviceTensorMap inputs_, outputs_;
  hipGraph_t graph_ = nullptr;
  hipGraphExec_t exec_ = nullptr;
};

// Checks one replay against the reference and an eager launch, both run on the same padded inputs
// at the bucket's case; returns the failures (empty when it passed) and raises `budget_used`. The
// outputs were poisoned before each run, so what padding must leave alone is compared as unwritten.
// `scores`: what the checks look up (topk_scores), taken before the reference was masked.
std::vector<std::string> check_replay(const Component& component, const std::string& label, const Case& bucket_case,
                                      const TensorMap& scores, const TensorMap& reference, const TensorMap& eager,
                                      const TensorMap& replayed, double& budget_used) {
  std::vector<std::string> failures;
  const std::string where = label + " replayed in bucket " +
                            std::to_string(bucket_case.integer(component.batch_param)) + ": ";
  for (const auto& [name, got] : replayed) {
    const OutputComparison vs_ref = compare_output(name, reference.at(name), Poison::a, got, Poison::b,
                                                   output_check(component, bucket_case, name, got.dtype()), &scores);
    const OutputComparison vs_eager = compare_output(name, eager.at(name), Poison::a, got, Poison::b, OutputCheck{});
    budget_used = std::max(budget_used, vs_ref.budget_used);
    if (!vs_ref.passed()) failures.push_back(where + "replay vs reference: " + vs_ref.summary());
    if (!vs_eager.passed()) failures.push_back(where + "replay vs eager: " + vs_eager.summary());
  }
  return failures;
}

}  // namespace

ReplayResult run_graph_replay(GpuBackend& eager, hipStream_t stream, const Component& component, const Case& base,
                              const ReplayOptions& options) {
  if (!component.gpu) throw std::runtime_error(component.name + " has no GPU kernel in this build");
  if (options.buckets.empty() || options.buckets.back() < options.max_batch)
    throw std::invalid_argument("graph replay: the largest bucket must hold max_batch");
  if (options.min_batch < 1 || options.min_batch > options.max_batch)
    throw std::invalid_argument("graph replay: min_batch must be in [1, max_batch]");
  // Only the buckets that hold a replayed batch: [first, last] of options.buckets.
  const auto first = std::lower_bound(options.buckets.begin(), options.buckets.end(), options.min_batch);
  const auto last = std::lower_bound(options.buckets.begin(), options.buckets.end(), options.max_batch);
  std::vector<std::unique_ptr<CapturedBucket>> captured;
  for (auto b = first; b <= last; ++b)
    captured.push_back(std::make_unique<CapturedBucket>(
        component, base.with(component.batch_param, std::to_string(*b)), stream));

  ReplayResult result;
  constexpr size_t kFailuresKept = 5;
  std::unique_ptr<BucketBatches> batches;
  for (int64_t n = options.min_batch; n <= options.max_batch; ++n) {
    if (options.on_batch) options.on_batch(n);
    const auto it = std::lower_bound(first, last + 1, n);
    CapturedBucket& bucket = *captured[static_cast<size_t>(it - first)];
    if (!batches || batches->bucket() != *it) batches = std::make_unique<BucketBatches>(component, base, *it);
    ReplayBatch batch = batches->at(n);
    const TensorMap& padded = batch.padded;
    TensorMap& reference = batch.reference;
    TensorMap eager_outputs = eager.run(component, bucket.bucket_case(), padded, Poison::a);
    TensorMap bucket_outputs = component.make_outputs(bucket.bucket_case());
    fill_poison(bucket_outputs, Poison::b);
    TensorMap replayed = bucket.replay(padded, bucket_outputs, stream);
    const TensorMap scores = topk_scores(component, bucket.bucket_case(), padded, reference);
    mask_unchecked(component, bucket.bucket_case(), reference, Poison::a);
    mask_unchecked(component, bucket.bucket_case(), eager_outputs, Poison::a);
    mask_unchecked(component, bucket.bucket_case(), replayed, Poison::b);
    const std::vector<std::string> failures =
        check_replay(component, batch.label, bucket.bucket_case(), scores, reference, eager_outputs, replayed,
                     result.budget_used);
    ++result.batches_checked;
    if (!failures.empty()) ++result.batches_failed;
    for (const std::string& f : failures)
      if (result.failures.size() < kFailuresKept) result.failures.push_back(f);
    // Enough is known once a few batches failed; the rest would only cost time (a mutant's run).
    if (result.batches_failed >= static_cast<int64_t>(kFailuresKept)) break;
  }
  return result;
}

}  // namespace dsv4h
