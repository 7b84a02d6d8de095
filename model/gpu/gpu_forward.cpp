// The tiny model's GPU forward (issue 31), first version: correctness, request by request.
//
// What runs each op (the reference's names, model/attention.h and block.h):
//   embed, mtp.M.embed          glue: a row gather of the bf16 table (glue_kernels.hip)
//   *.hc_{attn,ffn}.pre / .post kernels/mhc.h (fp64 inside, bf16 streams, fp32 post and comb)
//   every norm                  kernels/rms_norm.h (bf16 rows, fp32 weight)
//   the projections             cuBLAS cublasGemmEx on NVIDIA (bf16 in, fp32 accumulation, output
//                               rounded once to bf16, or fp32 for gate logits, the indexer's head
//                               weights and the head's logits); the compressors' fp32 weights take
//                               the normed input widened to fp32 (COMPUTE_32F_PEDANTIC: no TF32).
//                               AMD: the plain GEMM of glue_kernels.hip (no hipBLASLt here yet).
//   attn.q_rope                 glue: each head's RMS norm and rope, fp64, into heads padded to 16
//   attn.kv_cache               glue rope of the latent, then kernels/kv_pool.h's store into the
//                               request's MODEL1 SWA pool; the op's output is the pool read back
//                               (launch_kv_gather_model1): what attention will read
//   attn.compress, attn.indexer.compress
//                               kernels/compressor.h, writing the request's C4 / C128 / indexer
//                               pools and its state ring; outputs read back from the pools
//   attn.indexer.q              GEMM, then kernels/indexer.h's query (rope, Hadamard, fp8); the
//                               output is the fp8 codes' values times their scales
//   attn.indexer.weights        GEMM with the 128^-0.5 n_heads^-0.5 scale as its alpha
//   attn.index_select           indexer logits + top-k over the request's fp8 indexer pool
//   attn.attend                 kernels/sparse_attention.h: the prefill kernel for a prefill call,
//                               the decode kernel for a decode step
//   attn.wo_a                   one GEMM a group, strided views of the attention output
//   ffn.gate / route            GEMM (fp32 logits), kernels/moe_routing.h (hash or biased top-k)
//   ffn.experts                 kernels/moe.h's filtered MoE, once per simulated expert-parallel
//                               rank (its local experts, the rest filtered), the partials summed
//   ffn.shared                  the same MoE with one expert, every token's slot on it, weight 1
//   head.hc                     glue (sigmoid weights, fp64); head.norm, head.proj as above
//   mtp.M.input                 glue: e_proj + h_proj into the streams, rounded once
//
// Layouts adapted to the kernels (the ops still report the reference's shapes):
// - Sparse attention takes heads in multiples of 16: q is written padded to 16 heads (zeros; sink 0
//   for the padding), the output read from the first n_heads. wo_a reads it in place (stride 16 x 512).
// - The latent is cached as MODEL1 FP8 (7 tiles of 64 e4m3 with ue8m0 scales, 64 bf16 rope dims):
//   the reference's cache_qdq is that same pack and unpack, so kv_cache reports the unpacked pool.
// - The indexer's keys and queries are fp8 (the indexer kernels' format), not the reference's FP4
//   simulation: the reference it is compared with is built with gpu_forward_reference_options().
// - Pools are per request and per layer, slot = page * entries_a_page + entry with page 0 left
//   empty (the stores' sink and the compressor's dummy slot 0): SWA latents of position p at slot
//   256 + p (pages of 256), C4 entry j at 64 + j (the C4 page table of every row is 1, 2, ...),
//   C128 entry j at 2 + j. So the window's and C128's indices are made on the host per call, and
//   C4's come from the indexer's top-k through its page table (launch_indexer_page_slots).
//
// Observers may change an op's outputs (fault injection, model/fault_injection.h): the forward
// then writes them back to the device and goes on from them. The outputs read back from a pool
// are written back by storing them again (the latent, the main compressed entries); the indexer's
// keys and queries are fp8 codes with scales that a host value does not give back, so a changed
// one is an error naming the op. Inputs are not reported (OpInput lists are empty): the trace and
// bisection need the outputs only.
//
// Not yet: a batch of requests in one forward (requests run one after another, each its own
// calls, as model/backend.h allows), decode captured as a graph per bucket, and any attention to
// speed (per-call allocations, host-made indices). Each is a follow-up of issue 31.
#include "gpu_forward.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <stdexcept>
#include <vector>

#include "glue_kernels.h"
#include "harness/gpu/device_tensor.h"
#include "kernels/compressor.h"
#include "kernels/indexer.h"
#include "kernels/kv_pool.h"
#include "kernels/mhc.h"
#include "kernels/moe.h"
#include "kernels/moe_routing.h"
#include "kernels/rms_norm.h"
#include "kernels/sparse_attention.h"
#include "model/block.h"
#include "reference/compressor.h"
#include "reference/errors.h"
#include "reference/kv_cache_model1.h"
#include "reference/narrow_float.h"
#include "reference/rope.h"

#if defined(DSV4H_GPU_NVIDIA)
#include "harness/gpu/cublas_library.h"
#endif

namespace dsv4h::model {
namespace {

constexpr int64_t kDims = 512;           // the latent (head_dim)
constexpr int64_t kIndexDims = 128;      // the indexer's head dim
constexpr int64_t kHeadBlock = 16;       // sparse attention's heads come in 16s
constexpr int64_t kSwaPageTokens = 256;  // spec 4.1
constexpr int64_t kC4PageEntries = 64;
constexpr int64_t kIndexerEntryBytes = 132;

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error("GPU forward: " + what); }

// The harness's device allocation (harness/gpu/device_tensor.h), zeroed, with a typed view: a
// pool's pages nobody wrote read as zeros (the indexer reads a partly filled page whole and
// discards the entries past the visible ones), not as uninitialised memory.
class DeviceBytes : public DeviceBuffer {
 public:
  DeviceBytes() = default;
  explicit DeviceBytes(size_t bytes) : DeviceBuffer(bytes) {
    if (bytes) DSV4H_HIP_CHECK(hipMemset(data(), 0, bytes));
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data());
  }
};

template <typename T>
DeviceBytes upload(const std::vector<T>& values) {
  DeviceBytes d(values.size() * sizeof(T));
  if (!values.empty()) DSV4H_HIP_CHECK(hipMemcpy(d.as<void>(), values.data(), d.bytes(), hipMemcpyHostToDevice));
  return d;
}

template <typename T>
DeviceBytes device_array(int64_t n) {
  return DeviceBytes(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T));
}

std::vector<uint16_t> to_bf16(const double* v, size_t n) {
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = reference::double_to_bf16(v[i]);
  return out;
}

// A device matrix of one dtype, rows with a leading dimension (elements), as an op's output.
enum class Dtype { bf16, f32, i32 };

struct DeviceView {
  void* p = nullptr;
  Dtype dtype = Dtype::bf16;
  int64_t rows = 0, cols = 0, ld = 0;
};

size_t dtype_bytes(Dtype d) { return d == Dtype::bf16 ? 2 : 4; }

RowMatrix download(const DeviceView& v, hipStream_t stream) {
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream));
  RowMatrix m(v.rows, v.cols);
  if (v.rows == 0 || v.cols == 0) return m;
  std::vector<uint8_t> raw(static_cast<size_t>(v.rows * v.ld) * dtype_bytes(v.dtype));
  DSV4H_HIP_CHECK(hipMemcpy(raw.data(), v.p, raw.size(), hipMemcpyDeviceToHost));
  for (int64_t r = 0; r < v.rows; ++r)
    for (int64_t c = 0; c < v.cols; ++c) {
      const size_t i = static_cast<size_t>(r * v.ld + c);
      if (v.dtype == Dtype::bf16) {
        uint16_t b;
        std::memcpy(&b, raw.data() + 2 * i, 2);
        m(r, c) = reference::bf16_to_float(b);
      } else if (v.dtype == Dtype::f32) {
        float f;
        std::memcpy(&f, raw.data() + 4 * i, 4);
        m(r, c) = f;
      } else {
        int32_t k;
        std::memcpy(&k, raw.data() + 4 * i, 4);
        m(r, c) = k;
      }
    }
  return m;
}

// Writes m into v (rounded to v's dtype), leaving the padding between rows as it is.
void write_back(const RowMatrix& m, const DeviceView& v, hipStream_t stream) {
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream));
  if (v.rows == 0 || v.cols == 0) return;
  std::vector<uint8_t> raw(static_cast<size_t>(v.rows * v.ld) * dtype_bytes(v.dtype));
  DSV4H_HIP_CHECK(hipMemcpy(raw.data(), v.p, raw.size(), hipMemcpyDeviceToHost));
  for (int64_t r = 0; r < v.rows; ++r)
    for (int64_t c = 0; c < v.cols; ++c) {
      const size_t i = static_cast<size_t>(r * v.ld + c);
      if (v.dtype == Dtype::bf16) {
        const uint16_t b = reference::double_to_bf16(m(r, c));
        std::memcpy(raw.data() + 2 * i, &b, 2);
      } else if (v.dtype == Dtype::f32) {
        const float f = static_cast<float>(m(r, c));
        std::memcpy(raw.data() + 4 * i, &f, 4);
      } else {
        const int32_t k = static_cast<int32_t>(m(r, c));
        std::memcpy(raw.data() + 4 * i, &k, 4);
      }
    }
  DSV4H_HIP_CHECK(hipMemcpy(v.p, raw.data(), raw.size(), hipMemcpyHostToDevice));
}

bool same_bits(const RowMatrix& a, const RowMatrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<size_t>(a.size())) == 0;
}

// One output of an op: how to read it, and how to write an observer's change back (null: it
// cannot be, and a change is an error naming the op).
struct ReportedOutput {
  const char* name;
  DeviceView view;
  OpValues values = OpValues::real;
  std::function<void(const RowMatrix&)> write = nullptr;
  std::function<RowMatrix()> read = nullptr;  // where the host value is not the view's (e.g. scaled codes)
};

// One attention layer's device state for one request: its pools, and its compressors' rings.
struct LayerState {
  int64_t ratio = 0, length = 0, entries = 0, index_entries = 0;
  int64_t swa_pages = 0, comp_pages = 0, comp_page_entries = 0, comp_page_bytes = 0, c4_pages = 0;
  DeviceBytes swa, comp, index;
  DeviceBytes ring, ring_out, index_ring, index_ring_out;
};

struct RequestPools {
  std::vector<LayerState> layers;  // the main layers, then the MTP blocks'
};

class GpuForward : public ModelBackend {
 public:
  GpuForward(const ReferenceModel& model, const GpuForwardOptions& options);
  ~GpuForward() override;
  std::string name() const override { return "gpu"; }
  void run(const RunPlan& plan, OpObserver& observer) const override;

 private:
  using Buf = DeviceBytes;

  const float* f32(const std::string& name) const { return weight(name).as<const float>(); }
  const uint16_t* bf16(const std::string& name) const { return weight(name).as<const uint16_t>(); }
  const DeviceBytes& weight(const std::string& name) const {
    const auto it = weights_.find(name);
    if (it == weights_.end()) fail("no weight " + name + " on the device");
    return it->second;
  }

  void report(const std::string& op, std::vector<ReportedOutput> outputs) const;
  void gemm(const void* x, Dtype in, int64_t ldx, const void* w, int64_t ldw, void* y, Dtype out, int64_t ldy, int64_t rows,
            int64_t k, int64_t n, float alpha = 1.f) const;
  // y [rows, out] bf16 (or f32) = x [rows, in] W^T for the weight `name` [out, in].
  Buf linear(const uint16_t* x, int64_t rows, const std::string& name, Dtype out_dtype, float alpha = 1.f) const;
  Buf rms_norm(const uint16_t* x, int64_t rows, int64_t dim, const std::string& weight_name) const;
  // Reports the op's one output as `output` (the reference's name: "y", or gate's "logits" and the
  // indexer's "weights").
  Buf report_linear(const uint16_t* x, int64_t rows, const std::string& weight_name, const std::string& op, Dtype out = Dtype::bf16,
                    float alpha = 1.f, const char* output = "y") const;
  Buf report_norm(const uint16_t* x, int64_t rows, int64_t dim, const std::string& weight_name, const std::string& op) const;

  void call(const RunPlan& plan, int64_t r, int64_t s, RequestPools& state) const;
  Buf embed(const std::vector<int64_t>& tokens, int64_t copies, const std::string& op) const;
  Buf block(int64_t layer, const std::string& p, const Buf& h, int64_t T, const Buf& tokens, LayerState& cache) const;
  Buf attention(int64_t layer, const std::string& p, const Buf& x, int64_t T, LayerState& cache, bool prefill) const;
  Buf moe(int64_t layer, const std::string& p, const Buf& x, int64_t T, const Buf& tokens) const;
  Buf head(const Buf& h, int64_t T, const std::string& p) const;
  // The compressor of `p` ("...compressor.") over the call's x (fp32): the entries the call's
  // tokens complete into `pool` (entry j at slot page_entries + j), the ring carried on.
  void compress(int64_t layer, const std::string& p, int64_t dims, const Buf& xf, int64_t T, int64_t first_pos, uint8_t* pool,
                int64_t pool_slots, int64_t page_entries, Buf& ring, Buf& ring_out) const;
  LayerState new_layer(int64_t layer, int64_t capacity) const;
  void store_model1(uint8_t* pool, int64_t pages, int64_t page_entries, int64_t page_bytes, const uint16_t* rows,
                    const std::vector<int32_t>& slots) const;
  void gather_model1(uint8_t* pool, int64_t pages, int64_t page_entries, int64_t page_bytes, const std::vector<int32_t>& slots,
                     Buf& out) const;

  const ReferenceModel& model_;
  const ModelConfig& c_;
  GpuForwardOptions options_;
  std::map<std::string, DeviceBytes> weights_;
  hipStream_t stream_ = nullptr;
#if defined(DSV4H_GPU_NVIDIA)
  const CublasLibrary* blas_library_ = nullptr;
  cublasHandle_t blas_ = nullptr;
#endif
  mutable OpObserver* observer_ = nullptr;
};

// ---- setup ------------------------------------------------------------------------------------

void require_config(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("GPU forward: the kernels cannot run this config: " + what);
}

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

// ---- op plumbing ------------------------------------------------------------------------------

void GpuForward::report(const std::string& op, std::vector<ReportedOutput> outputs) const {
  std::vector<RowMatrix> values, before;
  for (const ReportedOutput& o : outputs) values.push_back(o.read ? o.read() : download(o.view, stream_));
  before = values;
  std::vector<OpOutput> out;
  for (size_t i = 0; i < outputs.size(); ++i) out.push_back({outputs[i].name, &values[i], outputs[i].values});
  observer_->op(op, {}, out);
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (same_bits(values[i], before[i])) continue;
    if (values[i].rows() != before[i].rows() || values[i].cols() != before[i].cols())
      fail("the observer of " + op + " resized its output " + outputs[i].name);
    if (outputs[i].write) {
      outputs[i].write(values[i]);
    } else if (!outputs[i].read) {
      write_back(values[i], outputs[i].view, stream_);
    } else {
      fail("the observer changed " + op + "'s output " + outputs[i].name +
           ", which the GPU forward cannot write back (fp8 codes with their scales)");
    }
  }
}

void GpuForward::gemm(const void* x, Dtype in, int64_t ldx, const void* w, int64_t ldw, void* y, Dtype out, int64_t ldy,
                      int64_t rows, int64_t k, int64_t n, float alpha) const {
  if (rows == 0) return;
#if defined(DSV4H_GPU_NVIDIA)
  // Row-major y [rows, n] = x [rows, k] W^T is column-major y^T [n, rows] = W^T' x^T': W as stored
  // is column-major [k, n] (ld ldw), transposed; x column-major [k, rows] (ld ldx).
  const float beta = 0.f;
  const cudaDataType_t tin = in == Dtype::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cudaDataType_t tout = out == Dtype::bf16 ? CUDA_R_16BF : CUDA_R_32F;
  const cublasComputeType_t compute = in == Dtype::f32 ? CUBLAS_COMPUTE_32F_PEDANTIC : CUBLAS_COMPUTE_32F;
  const cublasStatus_t status = blas_library_->gemm(blas_, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(rows),
                                             static_cast<int>(k), &alpha, w, tin, static_cast<int>(ldw), x, tin,
                                             static_cast<int>(ldx), &beta, y, tout, static_cast<int>(ldy), compute,
                                             CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) fail("cublasGemmEx failed (status " + std::to_string(static_cast<int>(status)) + ")");
#else
  if (in == Dtype::bf16 && out == Dtype::bf16)
    gpu::launch_plain_gemm(static_cast<const uint16_t*>(x), ldx, static_cast<const uint16_t*>(w), ldw, static_cast<uint16_t*>(y),
                           ldy, rows, k, n, alpha, stream_);
  else if (in == Dtype::bf16)
    gpu::launch_plain_gemm(static_cast<const uint16_t*>(x), ldx, static_cast<const uint16_t*>(w), ldw, static_cast<float*>(y), ldy,
                           rows, k, n, alpha, stream_);
  else
    gpu::launch_plain_gemm(static_cast<const float*>(x), ldx, static_cast<const float*>(w), ldw, static_cast<float*>(y), ldy,
                           rows, k, n, alpha, stream_);
#endif
}

GpuForward::Buf GpuForward::linear(const uint16_t* x, int64_t rows, const std::string& name, Dtype out_dtype, float alpha) const {
  const Tensor& t = model_.weights().tensor(name);
  const int64_t n = t.shape.at(0), k = t.shape.at(1);
  Buf y(static_cast<size_t>(std::max<int64_t>(rows * n, 1)) * dtype_bytes(out_dtype));
  gemm(x, Dtype::bf16, k, bf16(name), k, y.as<void>(), out_dtype, n, rows, k, n, alpha);
  return y;
}

GpuForward::Buf GpuForward::rms_norm(const uint16_t* x, int64_t rows, int64_t dim, const std::string& weight_name) const {
  Buf y = device_array<uint16_t>(rows * dim);
  if (rows > 0) launch_rms_norm({x, f32(weight_name), y.as<uint16_t>(), rows, dim, static_cast<float>(c_.norm_eps)}, stream_);
  return y;
}

GpuForward::Buf GpuForward::report_linear(const uint16_t* x, int64_t rows, const std::string& weight_name, const std::string& op,
                                          Dtype out, float alpha, const char* output) const {
  Buf y = linear(x, rows, weight_name, out, alpha);
  const int64_t n = model_.weights().tensor(weight_name).shape.at(0);
  report(op, {{output, {y.as<void>(), out, rows, n, n}}});
  return y;
}

GpuForward::Buf GpuForward::report_norm(const uint16_t* x, int64_t rows, int64_t dim, const std::string& weight_name,
                                        const std::string& op) const {
  Buf y = rms_norm(x, rows, dim, weight_name);
  report(op, {{"y", {y.as<void>(), Dtype::bf16, rows, dim, dim}}});
  return y;
}

// ---- pools ------------------------------------------------------------------------------------

LayerState GpuForward::new_layer(int64_t layer, int64_t capacity) const {
  LayerState s;
  s.ratio = c_.compress_ratios[layer];
  s.swa_pages = 1 + (capacity + kSwaPageTokens - 1) / kSwaPageTokens;
  s.swa = DeviceBytes(static_cast<size_t>(s.swa_pages * reference::model1_page_bytes(kSwaPageTokens)));
  if (s.ratio == 0) return s;
  const auto clean_rings = [](int ratio, int dims, Buf& ring, Buf& ring_out) {
    // Rings of the compressor's batch layout: ring 0 (padding's) and ring 1, this request's.
    const reference::RowMatrixXf clean = reference::compressor_clean_ring({ratio, dims});
    std::vector<float> rows;
    for (int copy = 0; copy < 2; ++copy)
      for (int64_t r = 0; r < clean.rows(); ++r)
        for (int64_t k = 0; k < clean.cols(); ++k) rows.push_back(clean(r, k));
    ring = upload(rows);
    ring_out = upload(rows);
  };
  const int64_t entries = capacity / s.ratio;
  const CompressorPoolPages pages = compressor_pool_pages(s.ratio, kDims);
  s.comp_page_entries = pages.entries;
  s.comp_page_bytes = pages.bytes;
  s.comp_pages = 1 + (entries + pages.entries - 1) / pages.entries;
  s.comp = DeviceBytes(static_cast<size_t>(s.comp_pages * pages.bytes));
  clean_rings(static_cast<int>(s.ratio), static_cast<int>(kDims), s.ring, s.ring_out);
  if (s.ratio == 4) {
    // The indexer's pages: every row's page table is 1 .. c4_pages, at least one page.
    s.c4_pages = std::max<int64_t>(1, (entries + kC4PageEntries - 1) / kC4PageEntries);
    s.index = DeviceBytes(static_cast<size_t>((1 + s.c4_pages) * kC4PageEntries * kIndexerEntryBytes));
    clean_rings(4, static_cast<int>(kIndexDims), s.index_ring, s.index_ring_out);
  }
  return s;
}

void GpuForward::store_model1(uint8_t* pool, int64_t pages, int64_t page_entries, int64_t page_bytes, const uint16_t* rows,
                              const std::vector<int32_t>& slots) const {
  if (slots.empty()) return;
  const Buf loc = upload(slots);
  KvPoolSet pools;
  pools.swa = {pool, 1, pages, page_entries, page_bytes};
  KvStepLocations step;
  step.tokens = static_cast<int64_t>(slots.size());
  step.swa_out_loc = loc.as<int32_t>();
  KvLayerStore layer;
  layer.kv = rows;
  launch_kv_store_layer(pools, step, layer, stream_);
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));  // `loc` is freed on return
}

void GpuForward::gather_model1(uint8_t* pool, int64_t pages, int64_t page_entries, int64_t page_bytes,
                               const std::vector<int32_t>& slots, Buf& out) const {
  out = device_array<uint16_t>(static_cast<int64_t>(slots.size()) * kDims);
  if (slots.empty()) return;
  const Buf loc = upload(slots);
  launch_kv_gather_model1({pool, 1, pages, page_entries, page_bytes}, 0, loc.as<int32_t>(), static_cast<int64_t>(slots.size()),
                          out.as<uint16_t>(), stream_);
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
}

void GpuForward::compress(int64_t layer, const std::string& p, int64_t dims, const Buf& xf, int64_t T, int64_t first_pos,
                          uint8_t* pool, int64_t pool_slots, int64_t page_entries, Buf& ring, Buf& ring_out) const {
  const int64_t ratio = c_.compress_ratios[layer];
  const int64_t width = reference::compressor_series(static_cast<int>(ratio)) * dims;
  Buf kv = device_array<float>(T * width), score = device_array<float>(T * width);
  gemm(xf.as<void>(), Dtype::f32, c_.dim, f32(p + "wkv.weight"), c_.dim, kv.as<void>(), Dtype::f32, width, T, c_.dim, width);
  gemm(xf.as<void>(), Dtype::f32, c_.dim, f32(p + "wgate.weight"), c_.dim, score.as<void>(), Dtype::f32, width, T, c_.dim, width);
  std::vector<int32_t> out_loc(static_cast<size_t>(T), 0);  // slot 0: the dummy of a token that completes no entry
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = first_pos + t;
    if ((pos + 1) % ratio == 0) out_loc[static_cast<size_t>(t)] = static_cast<int32_t>(page_entries + (pos + 1) / ratio - 1);
  }
  const Buf start = upload(std::vector<int32_t>{static_cast<int32_t>(first_pos)});
  const Buf extend = upload(std::vector<int32_t>{static_cast<int32_t>(T)});
  const Buf ring_index = upload(std::vector<int32_t>{1});
  const Buf loc = upload(out_loc);
  // The kernel writes only the rows of the step's last tokens into ring_out: the rest carried over.
  DSV4H_HIP_CHECK(hipMemcpyAsync(ring_out.as<void>(), ring.as<void>(), ring.bytes(), hipMemcpyDeviceToDevice, stream_));
  CompressorArgs a;
  a.kv = kv.as<float>();
  a.score = score.as<float>();
  a.ape = f32(p + "ape");
  a.norm_weight = f32(p + "norm.weight");
  a.ring = ring.as<float>();
  a.start = start.as<int32_t>();
  a.extend_len = extend.as<int32_t>();
  a.ring_index = ring_index.as<int32_t>();
  a.out_loc = loc.as<int32_t>();
  a.pool = pool;
  a.ring_out = ring_out.as<float>();
  a.ratio = ratio;
  a.dims = dims;
  a.batch = 1;
  a.tokens = T;
  a.pool_slots = pool_slots;
  launch_compressor(a, stream_);
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));  // the step's inputs are freed on return
  std::swap(ring, ring_out);
}

// ---- the forward ------------------------------------------------------------------------------

GpuForward::Buf GpuForward::embed(const std::vector<int64_t>& tokens, int64_t copies, const std::string& op) const {
  const int64_t T = static_cast<int64_t>(tokens.size()), dim = c_.dim;
  std::vector<int32_t> ids(tokens.begin(), tokens.end());
  const Buf d_ids = upload(ids);
  Buf h = device_array<uint16_t>(T * copies * dim);
  gpu::launch_embed(bf16("embed.weight"), d_ids.as<int32_t>(), T, dim, copies, h.as<uint16_t>(), stream_);
  report(op, {{"h", {h.as<void>(), Dtype::bf16, T, copies * dim, copies * dim}}});
  return h;
}

GpuForward::Buf GpuForward::attention(int64_t layer, const std::string& p, const Buf& x, int64_t T, LayerState& cache,
                                      bool prefill) const {
  const int64_t H = c_.n_heads, Hp = (H + kHeadBlock - 1) / kHeadBlock * kHeadBlock, dim = c_.dim;
  const int64_t first_pos = cache.length, ratio = cache.ratio;
  const Eigen::VectorXd freqs = reference::rope_frequencies(c_.rope(layer));
  std::vector<int32_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[static_cast<size_t>(t)] = static_cast<int32_t>(first_pos + t);
  const Buf d_positions = upload(positions);
  const auto rope_args = [&](const uint16_t* in, uint16_t* out, int64_t heads, int64_t out_heads, bool norm) {
    gpu::HeadRopeArgs a{};
    a.x = in, a.out = out, a.T = T, a.heads = heads, a.out_heads = out_heads, a.first_pos = first_pos, a.norm = norm;
    a.eps = c_.norm_eps;
    for (int i = 0; i < 32; ++i) a.freqs[i] = freqs(i);
    return a;
  };

  // Projections; q's per-head norm and rope into heads padded to 16.
  const Buf qa = report_linear(x.as<uint16_t>(), T, p + "wq_a.weight", p + "wq_a");
  const Buf qr = report_norm(qa.as<uint16_t>(), T, c_.q_lora_rank, p + "q_norm.weight", p + "q_norm");
  const Buf qb = report_linear(qr.as<uint16_t>(), T, p + "wq_b.weight", p + "wq_b");
  Buf q = device_array<uint16_t>(T * Hp * kDims);
  gpu::launch_head_rope(rope_args(qb.as<uint16_t>(), q.as<uint16_t>(), H, Hp, true), stream_);
  report(p + "q_rope", {{"q", {q.as<void>(), Dtype::bf16, T, H * kDims, Hp * kDims}}});

  // The latent: norm, rope, the MODEL1 store into the SWA pool (slot 256 + position), read back.
  const Buf kv = report_linear(x.as<uint16_t>(), T, p + "wkv.weight", p + "wkv");
  const Buf kvn = report_norm(kv.as<uint16_t>(), T, kDims, p + "kv_norm.weight", p + "kv_norm");
  Buf latent = device_array<uint16_t>(T * kDims);
  gpu::launch_head_rope(rope_args(kvn.as<uint16_t>(), latent.as<uint16_t>(), 1, 1, false), stream_);
  const int64_t swa_page_bytes = reference::model1_page_bytes(kSwaPageTokens);
  std::vector<int32_t> swa_slots(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) swa_slots[static_cast<size_t>(t)] = static_cast<int32_t>(kSwaPageTokens + first_pos + t);
  uint8_t* swa = cache.swa.as<uint8_t>();
  store_model1(swa, cache.swa_pages, kSwaPageTokens, swa_page_bytes, latent.as<uint16_t>(), swa_slots);
  Buf cached;
  gather_model1(swa, cache.swa_pages, kSwaPageTokens, swa_page_bytes, swa_slots, cached);
  report(p + "kv_cache", {{"latent", {cached.as<void>(), Dtype::bf16, T, kDims, kDims}, OpValues::real,
                           [&](const RowMatrix& m) {
                             const Buf rows = upload(to_bf16(m.data(), static_cast<size_t>(m.size())));
                             store_model1(swa, cache.swa_pages, kSwaPageTokens, swa_page_bytes, rows.as<uint16_t>(), swa_slots);
                           }}});
  cache.length += T;
  const int64_t visible_last = ratio == 0 ? 0 : (first_pos + T) / ratio;

  // The compressors: the main entries into the C4 / C128 pool, the indexer's keys into its pool.
  Buf xf;
  if (ratio != 0) {
    xf = device_array<float>(T * dim);
    gpu::launch_bf16_to_f32(x.as<uint16_t>(), T * dim, xf.as<float>(), stream_);
    compress(layer, p + "compressor.", kDims, xf, T, first_pos, cache.comp.as<uint8_t>(), cache.comp_pages * cache.comp_page_entries,
             cache.comp_page_entries, cache.ring, cache.ring_out);
    std::vector<int32_t> slots;
    for (int64_t j = cache.entries; j < visible_last; ++j) slots.push_back(static_cast<int32_t>(cache.comp_page_entries + j));
    Buf entries;
    gather_model1(cache.comp.as<uint8_t>(), cache.comp_pages, cache.comp_page_entries, cache.comp_page_bytes, slots, entries);
    report(p + "compress", {{"entries", {entries.as<void>(), Dtype::bf16, static_cast<int64_t>(slots.size()), kDims, kDims},
                             OpValues::real, [&](const RowMatrix& m) {
                               const Buf rows = upload(to_bf16(m.data(), static_cast<size_t>(m.size())));
                               store_model1(cache.comp.as<uint8_t>(), cache.comp_pages, cache.comp_page_entries,
                                            cache.comp_page_bytes, rows.as<uint16_t>(), slots);
                             }}});
    cache.entries = visible_last;
  }

  // The lightning indexer (C4): keys, fp8 queries, head weights, scores and top-k over its pool.
  const int64_t W = std::min(c_.index_topk, visible_last), topk = c_.index_topk;
  Buf page_slots;
  if (ratio == 4) {
    const int64_t index_pages = 1 + cache.c4_pages, nI = c_.index_n_heads;
    compress(layer, p + "indexer.compressor.", kIndexDims, xf, T, first_pos, cache.index.as<uint8_t>(),
             index_pages * kC4PageEntries, kC4PageEntries, cache.index_ring, cache.index_ring_out);
    std::vector<int32_t> slots;
    for (int64_t j = cache.index_entries; j < visible_last; ++j) slots.push_back(static_cast<int32_t>(kC4PageEntries + j));
    const int64_t n = static_cast<int64_t>(slots.size());
    Buf keys = device_array<float>(n * kIndexDims);
    const KvPoolBuffer index_pool{cache.index.as<uint8_t>(), 1, index_pages, kC4PageEntries, kC4PageEntries * kIndexerEntryBytes};
    if (n > 0) {
      const Buf loc = upload(slots);
      launch_kv_gather_indexer(index_pool, 0, loc.as<int32_t>(), n, keys.as<float>(), stream_);
      DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
    }
    const DeviceView keys_view{keys.as<void>(), Dtype::f32, n, kIndexDims, kIndexDims};
    report(p + "indexer.compress", {{"keys", keys_view, OpValues::real, nullptr, [&] { return download(keys_view, stream_); }}});
    cache.index_entries = visible_last;

    const Buf qi = linear(qr.as<uint16_t>(), T, p + "indexer.wq_b.weight", Dtype::bf16);
    Buf q_fp8 = device_array<uint8_t>(T * nI * kIndexDims), q_scale = device_array<float>(T * nI);
    Buf q_values = device_array<float>(T * nI * kIndexDims);
    IndexerQueryArgs qa_args{};
    qa_args.q = qi.as<uint16_t>();
    qa_args.positions = d_positions.as<int32_t>();
    qa_args.q_fp8 = q_fp8.as<uint8_t>();
    qa_args.q_scale = q_scale.as<float>();
    qa_args.q_fp8_values = q_values.as<float>();
    for (int i = 0; i < 32; ++i) qa_args.freqs[i] = freqs(i);
    qa_args.rows = T;
    qa_args.heads = nI;
    launch_indexer_query(qa_args, stream_);
    const auto scaled_q = [&] {  // the codes' values times their (row, head) scale
      RowMatrix v = download({q_values.as<void>(), Dtype::f32, T, nI * kIndexDims, nI * kIndexDims}, stream_);
      const RowMatrix s = download({q_scale.as<void>(), Dtype::f32, T, nI, nI}, stream_);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < nI; ++h) v.row(t).segment(h * kIndexDims, kIndexDims) *= s(t, h);
      return v;
    };
    report(p + "indexer.q", {{"q", {q_values.as<void>(), Dtype::f32, T, nI * kIndexDims, nI * kIndexDims}, OpValues::real, nullptr,
                              scaled_q}});
    const float weight_scale = static_cast<float>(1 / std::sqrt(static_cast<double>(kIndexDims)) / std::sqrt(static_cast<double>(nI)));
    const Buf head_weights = report_linear(x.as<uint16_t>(), T, p + "indexer.weights_proj.weight", p + "indexer.weights",
                                           Dtype::f32, weight_scale, "weights");

    std::vector<int32_t> table(static_cast<size_t>(T * cache.c4_pages));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t g = 0; g < cache.c4_pages; ++g) table[static_cast<size_t>(t * cache.c4_pages + g)] = static_cast<int32_t>(1 + g);
    const Buf page_table = upload(table);
    const int64_t width = cache.c4_pages * kC4PageEntries;
    Buf logits = device_array<float>(T * width), indices = device_array<int32_t>(T * topk);
    IndexerLogitsArgs la{};
    la.q_fp8 = q_fp8.as<uint8_t>();
    la.q_scale = q_scale.as<float>();
    la.weights = head_weights.as<float>();
    la.positions = d_positions.as<int32_t>();
    la.page_table = page_table.as<int32_t>();
    la.cache = cache.index.as<uint8_t>();
    la.logits = logits.as<float>();
    la.rows = T;
    la.heads = nI;
    la.pages = cache.c4_pages;
    la.pool_pages = index_pages;
    launch_indexer_logits(la, stream_);
    launch_indexer_topk({logits.as<float>(), d_positions.as<int32_t>(), indices.as<int32_t>(), T, width, topk}, stream_);
    // Reported as the reference's: each row's entries ascending, -1 after, min(topk, visible) wide.
    const DeviceView raw{indices.as<void>(), Dtype::i32, T, topk, topk};
    const auto selected = [&] {
      const RowMatrix all = download(raw, stream_);
      RowMatrix s = RowMatrix::Constant(T, W, -1);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> row;
        for (int64_t j = 0; j < topk; ++j)
          if (all(t, j) >= 0) row.push_back(all(t, j));
        std::sort(row.begin(), row.end());
        for (size_t j = 0; j < row.size() && static_cast<int64_t>(j) < W; ++j) s(t, static_cast<int64_t>(j)) = row[j];
      }
      return s;
    };
    report(p + "index_select", {{"indices", raw, OpValues::index, [&](const RowMatrix& m) {
                                   RowMatrix full = RowMatrix::Constant(T, topk, -1);
                                   full.leftCols(W) = m;
                                   write_back(full, raw, stream_);
                                 },
                                 selected}});
    page_slots = device_array<int32_t>(T * topk);
    launch_indexer_page_slots({indices.as<int32_t>(), page_table.as<int32_t>(), page_slots.as<int32_t>(), T, topk, cache.c4_pages},
                              stream_);
    DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
  }

  // Sparse attention: the window (slots 256 + s), and the C128 entries or the indexer's choice.
  const int64_t window = c_.window_size;
  std::vector<int32_t> swa_indices(static_cast<size_t>(T * window), -1), swa_lengths(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t pos = first_pos + t, from = std::max<int64_t>(0, pos - window + 1);
    for (int64_t s = from; s <= pos; ++s) swa_indices[static_cast<size_t>(t * window + s - from)] = static_cast<int32_t>(kSwaPageTokens + s);
    swa_lengths[static_cast<size_t>(t)] = static_cast<int32_t>(pos - from + 1);
  }
  const Buf d_swa_indices = upload(swa_indices), d_swa_lengths = upload(swa_lengths);
  SparseAttentionArgs a;
  a.q = q.as<uint16_t>();
  a.window = {swa, kSwaPageTokens, d_swa_indices.as<int32_t>(), window, d_swa_lengths.as<int32_t>()};
  Buf d_extra_indices, d_extra_lengths;
  if (ratio == 128) {
    const int64_t width = std::max<int64_t>(1, visible_last);
    std::vector<int32_t> idx(static_cast<size_t>(T * width), -1), len(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      const int64_t n = (first_pos + t + 1) / 128;
      for (int64_t j = 0; j < n; ++j) idx[static_cast<size_t>(t * width + j)] = static_cast<int32_t>(cache.comp_page_entries + j);
      len[static_cast<size_t>(t)] = static_cast<int32_t>(n);
    }
    d_extra_indices = upload(idx), d_extra_lengths = upload(len);
    a.extra = {cache.comp.as<uint8_t>(), cache.comp_page_entries, d_extra_indices.as<int32_t>(), width, d_extra_lengths.as<int32_t>()};
  } else if (ratio == 4) {
    d_extra_lengths = upload(std::vector<int32_t>(static_cast<size_t>(T), static_cast<int32_t>(topk)));
    a.extra = {cache.comp.as<uint8_t>(), cache.comp_page_entries, page_slots.as<int32_t>(), topk, d_extra_lengths.as<int32_t>()};
  }
  std::vector<float> sink(static_cast<size_t>(Hp), 0.f);
  const Tensor& sink_weights = model_.weights().tensor(p + "attn_sink");
  for (int64_t h = 0; h < H; ++h) sink[static_cast<size_t>(h)] = static_cast<float>(sink_weights.values[static_cast<size_t>(h)]);
  const Buf d_sink = upload(sink);
  Buf o = device_array<uint16_t>(T * Hp * kDims), lse = device_array<float>(T * Hp);
  const int64_t splits = sparse_attention_splits(window, ratio == 0 ? 0 : a.extra.width);
  Buf scratch = device_array<float>(prefill || splits == 1 ? 1 : T * Hp * splits * 514);
  a.sink = d_sink.as<float>();
  a.positions = d_positions.as<int32_t>();
  a.out = o.as<uint16_t>();
  a.lse = lse.as<float>();
  a.scratch = scratch.as<float>();
  a.scratch_floats = static_cast<int64_t>(scratch.bytes() / sizeof(float));
  a.rows = T;
  a.heads = Hp;
  a.compress_ratio = ratio;
  if (prefill)
    launch_sparse_attention_prefill(a, stream_);
  else
    launch_sparse_attention(a, stream_);
  report(p + "attend", {{"o", {o.as<void>(), Dtype::bf16, T, H * kDims, Hp * kDims}}});

  // The grouped output projection: group g's heads (a strided view of o) through its wo_a rows.
  const int64_t G = c_.o_groups, r = c_.o_lora_rank, group_in = c_.heads_per_group() * kDims;
  Buf og = device_array<uint16_t>(T * G * r);
  const uint16_t* wo_a = bf16(p + "wo_a.weight");
  for (int64_t g = 0; g < G; ++g)
    gemm(o.as<uint16_t>() + g * group_in, Dtype::bf16, Hp * kDims, wo_a + g * r * group_in, group_in, og.as<uint16_t>() + g * r,
         Dtype::bf16, G * r, T, group_in, r);
  report(p + "wo_a", {{"y", {og.as<void>(), Dtype::bf16, T, G * r, G * r}}});
  Buf out = report_linear(og.as<uint16_t>(), T, p + "wo_b.weight", p + "wo_b");
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));  // the call's host-made indices are freed on return
  return out;
}

GpuForward::Buf GpuForward::moe(int64_t layer, const std::string& p, const Buf& x, int64_t T, const Buf& tokens) const {
  const int64_t E = c_.n_routed_experts, k = c_.n_activated_experts, dim = c_.dim, I = c_.moe_inter_dim;
  const Buf logits = report_linear(x.as<uint16_t>(), T, p + "gate.weight", p + "gate", Dtype::f32, 1.f, "logits");
  Buf ids = device_array<int32_t>(T * k), weights = device_array<float>(T * k);
  MoeRoutingArgs ra{};
  ra.logits = logits.as<float>();
  ra.hash = layer < c_.n_hash_layers;
  ra.bias = ra.hash ? nullptr : f32(p + "gate.bias");
  ra.token_ids = tokens.as<int32_t>();
  ra.tid2eid = ra.hash ? weight(p + "gate.tid2eid").as<int32_t>() : nullptr;
  ra.topk_ids = ids.as<int32_t>();
  ra.topk_weights = weights.as<float>();
  ra.tokens = T;
  ra.experts = E;
  ra.topk = k;
  ra.route_scale = c_.route_scale;
  if (T > 0) launch_moe_routing(ra, stream_);
  report(p + "route", {{"ids", {ids.as<void>(), Dtype::i32, T, k, k}, OpValues::index},
                       {"weights", {weights.as<void>(), Dtype::f32, T, k, k}}});

  // The filtered MoE, once per simulated rank, and the shared expert: fp32 [T, dim] each.
  const auto run_moe = [&](const int32_t* topk_ids, const float* topk_weights, int64_t slots, const std::string& stack,
                           int64_t first, int64_t local, float route_scale, float* out) {
    Buf local_ids = device_array<int32_t>(T * slots), gate_up = device_array<uint16_t>(T * slots * 2 * I);
    Buf act = device_array<uint16_t>(T * slots * I), down = device_array<float>(T * slots * dim);
    MoeArgs m{};
    m.hidden = x.as<uint16_t>();
    m.topk_ids = topk_ids;
    m.topk_weights = topk_weights;
    m.gate_up_weights = bf16(stack + ".gate_up") + first * 2 * I * dim;
    m.down_weights = bf16(stack + ".down") + first * dim * I;
    m.local_ids = local_ids.as<int32_t>();
    m.gate_up = gate_up.as<uint16_t>();
    m.act = act.as<uint16_t>();
    m.down = down.as<float>();
    m.out = out;
    m.tokens = T;
    m.hidden_size = dim;
    m.inter = I;
    m.topk = slots;
    m.first_expert = first;
    m.local_experts = local;
    m.route_scale = route_scale;
    m.swiglu_limit = static_cast<float>(c_.swiglu_limit);
    launch_moe(m, stream_);
    DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));  // the workspace is freed on return
  };
  Buf routed = device_array<float>(T * dim), partial = device_array<float>(T * dim);
  const int64_t R = options_.expert_ranks, local = E / R;
  for (int64_t rank = 0; rank < R; ++rank) {
    run_moe(ids.as<int32_t>(), weights.as<float>(), k, p + "routed", rank * local, local, static_cast<float>(c_.route_scale),
            rank == 0 ? routed.as<float>() : partial.as<float>());
    if (rank > 0) gpu::launch_accumulate(routed.as<float>(), partial.as<float>(), T * dim, stream_);
  }
  report(p + "experts", {{"y", {routed.as<void>(), Dtype::f32, T, dim, dim}}});
  const Buf zeros = upload(std::vector<int32_t>(static_cast<size_t>(std::max<int64_t>(T, 1)), 0));
  const Buf ones = upload(std::vector<float>(static_cast<size_t>(std::max<int64_t>(T, 1)), 1.f));
  Buf shared = device_array<float>(T * dim);
  run_moe(zeros.as<int32_t>(), ones.as<float>(), 1, p + "shared", 0, 1, 1.f, shared.as<float>());
  report(p + "shared", {{"y", {shared.as<void>(), Dtype::f32, T, dim, dim}}});
  Buf y = device_array<uint16_t>(T * dim);
  gpu::launch_sum_to_bf16(routed.as<float>(), shared.as<float>(), T * dim, y.as<uint16_t>(), stream_);
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
  return y;
}

GpuForward::Buf GpuForward::block(int64_t layer, const std::string& p, const Buf& h, int64_t T, const Buf& tokens,
                                  LayerState& cache) const {
  const int64_t dim = c_.dim, hc = c_.hc_mult;
  struct Mix {
    Buf x, post, comb;
  };
  const auto pre = [&](const Buf& streams, const std::string& sub) {
    Mix m{device_array<uint16_t>(T * dim), device_array<float>(T * hc), device_array<float>(T * hc * hc)};
    MhcPreArgs a{};
    a.h = streams.as<uint16_t>();
    a.fn = f32(p + "hc_" + sub + "_fn");
    a.scale = f32(p + "hc_" + sub + "_scale");
    a.base = f32(p + "hc_" + sub + "_base");
    a.x = m.x.as<uint16_t>();
    a.post = m.post.as<float>();
    a.comb = m.comb.as<float>();
    a.tokens = T;
    a.dim = dim;
    a.sinkhorn_iters = c_.hc_sinkhorn_iters;
    a.hc_eps = c_.hc_eps;
    a.norm_eps = c_.norm_eps;
    launch_mhc_pre(a, stream_);
    report(p + "hc_" + sub + ".pre", {{"x", {m.x.as<void>(), Dtype::bf16, T, dim, dim}},
                                      {"post", {m.post.as<void>(), Dtype::f32, T, hc, hc}},
                                      {"comb", {m.comb.as<void>(), Dtype::f32, T, hc * hc, hc * hc}}});
    return m;
  };
  const auto post = [&](const Buf& x, const Buf& residual, const Mix& m, const std::string& sub) {
    Buf out = device_array<uint16_t>(T * hc * dim);
    launch_mhc_post({x.as<uint16_t>(), residual.as<uint16_t>(), m.post.as<float>(), m.comb.as<float>(), out.as<uint16_t>(), T, dim},
                    stream_);
    report(p + "hc_" + sub + ".post", {{"h", {out.as<void>(), Dtype::bf16, T, hc * dim, hc * dim}}});
    return out;
  };
  const Mix a = pre(h, "attn");
  const Buf x = report_norm(a.x.as<uint16_t>(), T, dim, p + "attn_norm.weight", p + "attn_norm");
  const bool prefill = cache.length == 0;
  const Buf attn = attention(layer, p + "attn.", x, T, cache, prefill);
  const Buf mid = post(attn, h, a, "attn");
  const Mix f = pre(mid, "ffn");
  const Buf y = report_norm(f.x.as<uint16_t>(), T, dim, p + "ffn_norm.weight", p + "ffn_norm");
  const Buf ffn = moe(layer, p + "ffn.", y, T, tokens);
  return post(ffn, mid, f, "ffn");
}

GpuForward::Buf GpuForward::head(const Buf& h, int64_t T, const std::string& p) const {
  const int64_t dim = c_.dim;
  Buf x = device_array<uint16_t>(T * dim);
  gpu::launch_head_hc(h.as<uint16_t>(), f32(p + "hc_head_fn"), f32(p + "hc_head_scale"), f32(p + "hc_head_base"), T, c_.hc_mult, dim,
                      c_.hc_eps, c_.norm_eps, x.as<uint16_t>(), stream_);
  report(p + "head.hc", {{"x", {x.as<void>(), Dtype::bf16, T, dim, dim}}});
  const Buf y = report_norm(x.as<uint16_t>(), T, dim, p + "norm.weight", p + "head.norm");
  return report_linear(y.as<uint16_t>(), T, "head.weight", p + "head.proj", Dtype::f32);
}

void GpuForward::call(const RunPlan& plan, int64_t r, int64_t s, RequestPools& state) const {
  const std::vector<int64_t>& tokens = plan.tokens[static_cast<size_t>(r)];
  const auto [begin, end] = plan.positions(s);
  const int64_t T = end - begin, hc = c_.hc_mult, dim = c_.dim;
  observer_->begin_call(r, s);
  const std::vector<int64_t> own(tokens.begin() + begin, tokens.begin() + end);
  const Buf d_tokens = upload(std::vector<int32_t>(own.begin(), own.end()));
  Buf h = embed(own, hc, "embed");
  for (int64_t l = 0; l < c_.n_layers; ++l)
    h = block(l, "layers." + std::to_string(l) + ".", h, T, d_tokens, state.layers[static_cast<size_t>(l)]);
  head(h, T, "");

  // MTP block 0 over the positions with a next token: the main streams' first n rows.
  const int64_t n = std::min<int64_t>(end, static_cast<int64_t>(tokens.size()) - 1) - begin;
  if (c_.n_mtp_layers == 0 || n <= 0) return;
  const std::string p = "mtp.0.";
  const std::vector<int64_t> next(tokens.begin() + begin + 1, tokens.begin() + begin + 1 + n);
  const Buf d_next = upload(std::vector<int32_t>(next.begin(), next.end()));
  const Buf e = embed(next, 1, p + "embed");
  const Buf en = report_norm(e.as<uint16_t>(), n, dim, p + "enorm.weight", p + "enorm");
  const Buf e_proj = report_linear(en.as<uint16_t>(), n, p + "e_proj.weight", p + "e_proj");
  const Buf hn = report_norm(h.as<uint16_t>(), n * hc, dim, p + "hnorm.weight", p + "hnorm");
  const Buf h_proj = report_linear(hn.as<uint16_t>(), n * hc, p + "h_proj.weight", p + "h_proj");
  Buf x = device_array<uint16_t>(n * hc * dim);
  gpu::launch_mtp_input(e_proj.as<uint16_t>(), h_proj.as<uint16_t>(), n, hc, dim, x.as<uint16_t>(), stream_);
  report(p + "input", {{"h", {x.as<void>(), Dtype::bf16, n, hc * dim, hc * dim}}});
  const Buf out = block(c_.n_layers, p, x, n, d_next, state.layers[static_cast<size_t>(c_.n_layers)]);
  head(out, n, p);
}

void GpuForward::run(const RunPlan& plan, OpObserver& observer) const {
  const int64_t R = static_cast<int64_t>(plan.tokens.size());
  for (int64_t r = 0; r < R; ++r) {
    if (plan.prompt < 1 || plan.steps(r) < 1)
      throw BadInput("run plan: request " + std::to_string(r) + " has fewer tokens than the prompt (" +
                     std::to_string(plan.prompt) + ")");
    for (int64_t t : plan.tokens[static_cast<size_t>(r)])
      if (t < 0 || t >= c_.vocab_size) throw BadInput("run plan: request " + std::to_string(r) + " has token " + std::to_string(t) +
                                                      " outside the vocabulary");
  }
  if (c_.n_mtp_layers > 1) fail("only MTP block 0 runs (n_mtp_layers " + std::to_string(c_.n_mtp_layers) + ")");
  observer_ = &observer;
  for (int64_t r = 0; r < R; ++r) {
    const int64_t capacity = static_cast<int64_t>(plan.tokens[static_cast<size_t>(r)].size());
    RequestPools state;
    for (int64_t l = 0; l < c_.n_layers + c_.n_mtp_layers; ++l) state.layers.push_back(new_layer(l, capacity));
    for (int64_t s = 0; s < plan.steps(r); ++s) call(plan, r, s, state);
  }
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
  observer_ = nullptr;
}

}  // namespace

std::unique_ptr<ModelBackend> open_gpu_forward(const ReferenceModel& model, const GpuForwardOptions& options,
                                               std::string& why_not) {
  int count = 0;
  const hipError_t status = hipGetDeviceCount(&count);
  if (status != hipSuccess || count == 0) {
    why_not = status != hipSuccess ? std::string("no GPU found: hipGetDeviceCount: ") + hipGetErrorName(status)
                                   : "no GPU found: hipGetDeviceCount reports 0 devices";
    (void)hipGetLastError();
    return nullptr;
  }
  return std::make_unique<GpuForward>(model, options);
}

}  // namespace dsv4h::model
