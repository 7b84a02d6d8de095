// The GPU forward's setup (forward_impl.h): the config checked against what the kernels run, the
// weights uploaded once (the experts stacked as kernels/moe.h takes them), the stream and cuBLAS.
#include "forward_impl.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <stdexcept>

#include "kernels/mhc.h"
#include "kernels/sparse_attention.h"
#include "model/block.h"
#include "reference/rope.h"
#include "weight_fill.h"

namespace dsv4h::model::gpu {

namespace {

#if defined(DSV4H_GPU_NVIDIA)
// DSV4H_GEMM=plain: the projections through glue_kernels.hip's plain GEMM (AMD's path) instead of
// cuBLAS, e.g. under compute-sanitizer racecheck, which cannot follow cuBLAS's Hopper GEMMs (their
// shared memory is ordered by asynchronous barriers; on the H100 it reported hazards inside them
// and, told to skip them, failed on a hardware exception while cublasGemmEx ran: H100, 2026-12-07).
// Unset or "cublas": cuBLAS.
bool plain_gemm_requested() {
  const char* value = std::getenv("DSV4H_GEMM");
  const std::string v = value ? value : "";
  if (v.empty() || v == "cublas") return false;
  if (v == "plain") return true;
  throw std::invalid_argument("DSV4H_GEMM must be \"cublas\" or \"plain\", got \"" + v + "\"");
}
#endif

void require_config(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("GPU forward: the kernels cannot run this config: " + what);
}

}  // namespace

GpuForward::GpuForward(const ReferenceModel& model, const GpuForwardOptions& options)
    : model_(model), c_(model.config()), options_(options) {
  require_config(c_.hc_mult == kHcMult, "hc_mult must be 4 (kernels/mhc.h)");
  require_config(c_.head_dim == kDims && c_.rope_head_dim == reference::kRopeDim, "head_dim 512 with 64 rope dims");
  require_config(c_.index_head_dim == kIndexDims, "index_head_dim must be 128");
  require_config(c_.n_heads >= 1 && c_.n_heads <= 1024, "n_heads in [1, 1024]");
  require_config(c_.n_shared_experts == 1, "one shared expert");
  require_config(options.expert_ranks >= 1 && c_.n_routed_experts % options.expert_ranks == 0,
                 "expert_ranks must divide n_routed_experts (" + std::to_string(c_.n_routed_experts) + ")");
  for (int64_t l = 0; l < c_.n_layers + c_.n_mtp_layers; ++l) {
    const int64_t ratio = c_.compress_ratios[l];
    const SparseAttentionRope kernel = sparse_attention_rope(ratio);
    const Eigen::VectorXd freqs = reference::rope_frequencies(c_.rope(l));
    for (int i = 0; i < 32; ++i)  // the two tables' formulas may round differently in the last bits
      require_config(std::abs(kernel.freqs[i] - freqs(i)) <= 1e-12 * std::abs(freqs(i)), "layer " + std::to_string(l) + "'s rope table differs from the kernels' "
                                                  "table for ratio " + std::to_string(ratio) + " (spec 2.4)");
  }
  DSV4H_HIP_CHECK(hipStreamCreate(&stream_));
  DSV4H_HIP_CHECK(hipStreamCreate(&side_stream_));
  DSV4H_HIP_CHECK(hipEventCreate(&forked_));
  DSV4H_HIP_CHECK(hipEventCreate(&joined_));
#if defined(DSV4H_GPU_NVIDIA)
  if (!plain_gemm_requested()) {
    blas_library_ = &CublasLibrary::get("GPU forward");
    if (blas_library_->create(&blas_) != CUBLAS_STATUS_SUCCESS) fail("cublasCreate failed");
    if (blas_library_->set_stream(blas_, stream_) != CUBLAS_STATUS_SUCCESS) fail("cublasSetStream failed");
    // A split-K GEMM reduces its partial sums in fp32, not in the bf16 output type: one rounding.
    if (blas_library_->set_math_mode(blas_, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) !=
        CUBLAS_STATUS_SUCCESS)
      fail("cublasSetMathMode failed");
    // A workspace of our own (32 MiB, what cuBLAS asks of Hopper): without one, a GEMM that needs
    // workspace (split-K) allocates it inside a capture, and a graph holding memory-allocation nodes
    // cannot be cloned (bench_model times each node of a step alone in a clone; cudaErrorNotSupported
    // at bs 8 on the H100, 2026-12-06).
    blas_workspace_ = DeviceBytes(size_t{32} << 20);
    if (blas_library_->set_workspace(blas_, blas_workspace_.data(), blas_workspace_.bytes()) != CUBLAS_STATUS_SUCCESS)
      fail("cublasSetWorkspace failed");
  }
#endif
  for (const WeightSpec& spec : weight_specs(c_)) shapes_.emplace(spec.name, spec.shape);
  if (options_.device_weights)
    make_device_weights();
  else
    upload_weights();
  for (const auto& [name, w] : weights_) {
    const std::string tail = "attn_sink";
    if (name.size() < tail.size() || name.compare(name.size() - tail.size(), tail.size(), tail) != 0) continue;
    std::vector<float> host(w.bytes() / sizeof(float));
    DSV4H_HIP_CHECK(hipMemcpy(host.data(), w.data(), w.bytes(), hipMemcpyDeviceToHost));
    sinks_.emplace(name, std::move(host));
  }
}

const std::vector<int64_t>& GpuForward::shape(const std::string& name) const {
  const auto it = shapes_.find(name);
  if (it == shapes_.end()) fail("no weight " + name + " in the config");
  return it->second;
}

const std::vector<float>& GpuForward::sinks(const std::string& p) const {
  const auto it = sinks_.find(p + "attn_sink");
  if (it == sinks_.end()) fail("no weight " + p + "attn_sink on the device");
  return it->second;
}

void GpuForward::upload_weights() {
  const Weights& w = model_.weights();
  for (const WeightSpec& spec : weight_specs(c_)) {
    const Tensor& t = w.tensor(spec.name);
    if (spec.dtype == StDtype::BF16) {
      weights_.emplace(spec.name, upload(to_bf16(t.values.data(), t.values.size())));
    } else if (spec.dtype == StDtype::F32) {
      weights_.emplace(spec.name, upload(std::vector<float>(t.values.begin(), t.values.end())));
    } else {
      std::vector<int32_t> v(t.values.size());
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int32_t>(t.values[i]);
      weights_.emplace(spec.name, upload(v));
    }
  }
  // Each MoE's experts stacked as kernels/moe.h takes them: gate_up [E, 2I, dim] (w1's rows, then
  // w3's), down [E, dim, I]; the shared expert as one more stack of one.
  const int64_t I = c_.moe_inter_dim, dim = c_.dim;
  const auto stack = [&](const std::string& ffn, const std::vector<std::string>& experts) {
    std::vector<double> gate_up, down;
    for (const std::string& e : experts) {
      for (const char* part : {"w1.weight", "w3.weight"}) {
        const Tensor& t = w.tensor(ffn + e + part);
        gate_up.insert(gate_up.end(), t.values.begin(), t.values.end());
      }
      const Tensor& t = w.tensor(ffn + e + "w2.weight");
      down.insert(down.end(), t.values.begin(), t.values.end());
    }
    if (gate_up.size() != experts.size() * static_cast<size_t>(2 * I * dim)) fail(ffn + ": unexpected expert shapes");
    weights_.emplace(ffn + (experts.size() == 1 ? "shared" : "routed") + ".gate_up", upload(to_bf16(gate_up.data(), gate_up.size())));
    weights_.emplace(ffn + (experts.size() == 1 ? "shared" : "routed") + ".down", upload(to_bf16(down.data(), down.size())));
  };
  for (int64_t l = 0; l < c_.n_layers + c_.n_mtp_layers; ++l) {
    const std::string ffn = (l < c_.n_layers ? "layers." + std::to_string(l) : "mtp." + std::to_string(l - c_.n_layers)) + ".ffn.";
    std::vector<std::string> experts;
    for (int64_t e = 0; e < c_.n_routed_experts; ++e) experts.push_back("experts." + std::to_string(e) + ".");
    stack(ffn, experts);
    stack(ffn, {"shared_experts."});
  }
}

// The tensors of the prefix made on the device (gpu_forward.h): each in make_weights' range, the
// experts only as their stacks (each stack one range: w1 and w3 share theirs), a hash routing
// table of distinct experts a token.
void GpuForward::make_device_weights() {
  const std::string& prefix = options_.device_weights_prefix;
  uint64_t seed = options_.device_weights_seed;
  const auto make = [&](const std::string& name, const WeightSpec& spec, int64_t n) {
    const auto [lo, hi] = weight_range(spec);
    DeviceBytes d(static_cast<size_t>(n) * (spec.dtype == StDtype::BF16 ? 2 : 4));
    launch_fill_uniform(d.data(), spec.dtype == StDtype::BF16, n, static_cast<float>(lo), static_cast<float>(hi), seed++, stream_);
    weights_.emplace(name, std::move(d));
  };
  const int64_t E = c_.n_routed_experts, I = c_.moe_inter_dim, dim = c_.dim;
  for (const WeightSpec& spec : weight_specs(c_)) {
    if (spec.name.compare(0, prefix.size(), prefix) != 0) continue;
    const int64_t n = std::accumulate(spec.shape.begin(), spec.shape.end(), int64_t{1}, std::multiplies<>());
    const size_t experts = spec.name.find("experts.");
    if (experts != std::string::npos) {
      // One stack a MoE, made at its first expert's w1 (routed) or the shared expert's.
      const std::string ffn = spec.name.substr(0, spec.name.rfind("ffn.") + 4);
      const bool shared = spec.name.find("shared_experts.") != std::string::npos;
      const std::string stack = ffn + (shared ? "shared" : "routed");
      const int64_t count = shared ? 1 : E;
      if (spec.name == ffn + (shared ? "shared_experts.w1.weight" : "experts.0.w1.weight")) {
        make(stack + ".gate_up", spec, count * 2 * I * dim);
        make(stack + ".down", {ffn + "experts.0.w2.weight", {dim, I}, StDtype::BF16}, count * dim * I);
      }
    } else if (spec.dtype == StDtype::I32) {
      DeviceBytes d(static_cast<size_t>(n) * sizeof(int32_t));
      launch_fill_hash_routing(d.as<int32_t>(), spec.shape.at(0), spec.shape.at(1), E, stream_);
      weights_.emplace(spec.name, std::move(d));
    } else {
      make(spec.name, spec, n);
    }
  }
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
}

GpuForward::~GpuForward() {
#if defined(DSV4H_GPU_NVIDIA)
  if (blas_) (void)blas_library_->destroy(blas_);
#endif
  if (forked_) (void)hipEventDestroy(forked_);
  if (joined_) (void)hipEventDestroy(joined_);
  if (side_stream_) (void)hipStreamDestroy(side_stream_);
  if (stream_) (void)hipStreamDestroy(stream_);
}

}  // namespace dsv4h::model::gpu
