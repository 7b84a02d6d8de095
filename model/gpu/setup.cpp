// The GPU forward's setup (forward_impl.h): the config checked against what the kernels run, the
// weights uploaded once (the experts stacked as kernels/moe.h takes them), the stream and cuBLAS.
#include "forward_impl.h"

#include <cmath>
#include <stdexcept>

#include "kernels/mhc.h"
#include "kernels/sparse_attention.h"
#include "model/block.h"
#include "reference/rope.h"

namespace dsv4h::model::gpu {

namespace {

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
#if defined(DSV4H_GPU_NVIDIA)
  blas_library_ = &CublasLibrary::get("GPU forward");
  if (blas_library_->create(&blas_) != CUBLAS_STATUS_SUCCESS) fail("cublasCreate failed");
  if (blas_library_->set_stream(blas_, stream_) != CUBLAS_STATUS_SUCCESS) fail("cublasSetStream failed");
  // A split-K GEMM reduces its partial sums in fp32, not in the bf16 output type: one rounding.
  if (blas_library_->set_math_mode(blas_, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)) !=
      CUBLAS_STATUS_SUCCESS)
    fail("cublasSetMathMode failed");
#endif
  const Weights& w = model.weights();
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

GpuForward::~GpuForward() {
#if defined(DSV4H_GPU_NVIDIA)
  if (blas_) (void)blas_library_->destroy(blas_);
#endif
  if (stream_) (void)hipStreamDestroy(stream_);
}

}  // namespace dsv4h::model::gpu
