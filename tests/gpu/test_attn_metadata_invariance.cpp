// Batch invariance of the metadata: a request's rows are the same whether it is alone in a bucket,
// first, in the middle or last of a batch, run eagerly or replayed from one captured graph. Each
// eager run is also checked against the reference (run_case), so a kernel that writes nothing
// cannot pass by being equally wrong everywhere. RapidCheck draws the request (seq_len biased to
// the block and window edges, mode, topk) and prints RC_PARAMS to reproduce a failure.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <memory>

#include "gpu_env.h"
#include "harness/gpu/device_tensor.h"
#include "harness/property.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

constexpr int64_t kBucket = 8, kReal = 5;

struct Request {
  int32_t slot, seq_len, extend;
  std::vector<int32_t> out_locs;  // one per row of the request
};

// The batch of `base` (kReal real requests of a bucket of kBucket, or only `x` when place < 0)
// with `x` put at `place`; returns the inputs and the first row of x.
std::pair<TensorMap, int64_t> batch_with(const Component& component, const Case& base, const Request& x, int64_t place) {
  const Case c = base.with("real", std::to_string(place < 0 ? 1 : kReal));
  TensorMap in = component.make_inputs(c);
  const int64_t at = place < 0 ? 0 : place;
  const int64_t repeat = base.integer("mode") == 3 ? base.integer("topk") : 1;
  int64_t first_row = 0;
  for (int64_t r = 0; r < at; ++r) first_row += in.at("extend_lens").data<int32_t>()[r] * repeat;
  // The requests after x keep their own rows, shifted by the difference in length.
  const int64_t old_rows = in.at("extend_lens").data<int32_t>()[at] * repeat;
  std::vector<int32_t> out(in.at("out_cache_loc").data<int32_t>(), in.at("out_cache_loc").data<int32_t>() + in.at("out_cache_loc").numel());
  out.erase(out.begin() + first_row, out.begin() + first_row + old_rows);
  out.insert(out.begin() + first_row, x.out_locs.begin(), x.out_locs.end());
  out.resize(static_cast<size_t>(in.at("out_cache_loc").numel()), 0);
  std::copy(out.begin(), out.end(), in.at("out_cache_loc").data<int32_t>());
  in.at("req_pool_indices").data<int32_t>()[at] = x.slot;
  in.at("seq_lens").data<int32_t>()[at] = x.seq_len;
  in.at("extend_lens").data<int32_t>()[at] = x.extend;
  return {in, first_row};
}

// Rows [first, first + count) of every per-row output.
std::map<std::string, std::vector<uint64_t>> rows_of(const TensorMap& outputs, int64_t first, int64_t count) {
  std::map<std::string, std::vector<uint64_t>> rows;
  for (const auto& [name, t] : outputs) {
    if (name == "temp_num_rows") continue;
    const HostTensor part = t.rows(first, first + count);
    for (int64_t i = 0; i < part.numel(); ++i) rows[name].push_back(part.bits(i));
  }
  return rows;
}

// One graph captured at the bucket's case and replayed with other inputs of the same shapes.
class Replayer {
 public:
  Replayer(const Component& component, const Case& c, const TensorMap& inputs)
      : inputs_(DeviceTensorMap::upload(inputs)), outputs_(DeviceTensorMap::like(component.make_outputs(c))) {
    DSV4H_HIP_CHECK(hipStreamCreate(&stream_));
    try {
      CaptureScope scope(c.str());
      DSV4H_HIP_CHECK(hipStreamBeginCapture(stream_, hipStreamCaptureModeGlobal));
      component.gpu(c, inputs_, outputs_, stream_);
      DSV4H_HIP_CHECK(hipStreamEndCapture(stream_, &graph_));
      DSV4H_HIP_CHECK(hipGraphInstantiate(&exec_, graph_, nullptr, nullptr, 0));
    } catch (...) {
      release();  // a broken capture must not leave the stream capturing for the tests after this one
      throw;
    }
  }
  ~Replayer() { release(); }
  TensorMap replay(const TensorMap& inputs, TensorMap poisoned) {
    inputs_.upload_into(inputs);
    outputs_.upload_into(poisoned);
    DSV4H_HIP_CHECK(hipGraphLaunch(exec_, stream_));
    DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
    return outputs_.download();
  }

 private:
  void release() {
    if (!graph_) (void)hipStreamEndCapture(stream_, &graph_);
    if (exec_) (void)hipGraphExecDestroy(exec_);
    if (graph_) (void)hipGraphDestroy(graph_);
    (void)hipStreamDestroy(stream_);
    (void)hipGetLastError();
  }

  DeviceTensorMap inputs_, outputs_;
  hipStream_t stream_ = nullptr;
  hipGraph_t graph_ = nullptr;
  hipGraphExec_t exec_ = nullptr;
};

TEST(AttnMetadataGpuProperty, RequestRowsDoNotDependOnTheirPlaceEagerOrReplayed) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Component& component = registry().get("attn_metadata");
  const bool ok = rc::check("a request's metadata rows are independent of its place in the batch", [&] {
    const int64_t mode = *rc::gen::element<int64_t>(0, 1, 2, 3);
    const int64_t topk = *rc::gen::inRange<int64_t>(1, 5);
    const uint64_t seed = *rc::gen::inRange<uint64_t>(0, 1u << 30);
    const Case base = parse_case("attn_metadata(bs=" + std::to_string(kBucket) + ",mode=" + std::to_string(mode) +
                                 ",extend=3,topk=" + std::to_string(topk) + ",ctx=1024,pool=64,seed=" +
                                 std::to_string(seed) + ")");
    const int64_t repeat = mode == 3 ? topk : 1;
    Request x;
    x.extend = mode == 2 ? 3 : mode == 1 ? *rc::gen::inRange(1, 4) : 1;
    x.seq_len = static_cast<int32_t>(*property::boundary_size(x.extend, 1024, {4, 128, 256}));
    x.slot = *rc::gen::inRange(0, 64);
    for (int64_t i = 0; i < x.extend * repeat; ++i) x.out_locs.push_back(*rc::gen::inRange(1, 1 << 20));
    std::printf("request: seq_len %d, extend %d, slot %d in %s\n", x.seq_len, x.extend, x.slot, base.str().c_str());

    std::unique_ptr<Replayer> replayer;
    std::map<std::string, std::vector<uint64_t>> alone;
    for (int64_t place : {int64_t{-1}, int64_t{0}, kReal / 2, kReal - 1}) {
      const auto [inputs, first] = batch_with(component, base, x, place);
      const Case c = base.with("real", std::to_string(place < 0 ? 1 : kReal));
      const CaseRun run = run_case(component, c, gpu, inputs);
      if (!run.result.passed()) RC_FAIL("place " + std::to_string(place) + ": " + run.result.report());
      const auto eager = rows_of(run.outputs.at("gpu"), first, x.extend * repeat);
      if (!replayer) replayer = std::make_unique<Replayer>(component, c, inputs);
      TensorMap poisoned = component.make_outputs(c);
      fill_poison(poisoned, Poison::b);
      const auto replayed = rows_of(replayer->replay(inputs, poisoned), first, x.extend * repeat);
      RC_ASSERT(replayed == eager);
      if (place < 0) alone = eager;
      RC_ASSERT(eager == alone);
    }
  });
  EXPECT_TRUE(ok) << "see the counterexample and the RC_PARAMS line above";
}

}  // namespace
}  // namespace dsv4h
