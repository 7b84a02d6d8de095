// Descriptor of `rms_norm`, RMSNorm of bf16 rows with an fp32 weight (spec 2.3): the attn and ffn
// norms (dim), the q norm (q_lora_rank), the kv norm (head_dim), the MTP's enorm and hnorm and the
// head's norm. One of the per-op checks the model's GPU forward is bisected with (issue 31).
//
// Tolerance: bf16_rounded_once, elementwise (the bf16 default). The kernel computes in fp32 and
// rounds once; the reference (reference/rms_norm.h) computes in fp64 and rounds once. The kernel's
// fp32 value is within (D/2 + 4) u relative of the exact one (u = 2^-24: the sum of D positive
// squares gamma_D, halved by the square root, plus the mean, eps, rsqrt at 2 ulp and the two
// products), i.e. at most D * 2^-17 bf16 ulp: 0.055 ulp at D = 7168, and its random-walk size
// sqrt(D) u is 0.0013 ulp. Both roundings then land on the same or adjacent bf16 values (1 ulp),
// and only elements that close to a rounding midpoint differ, far under the class's 10% bound.
#include <cmath>
#include <cstring>
#include <string>

#include "../../reference/rms_norm.h"
#include "../descriptor.h"
#include "index_tensors.h"
#include "../errors.h"
#include "../random.h"
#if DSV4H_GPU_LAYER
#include "../../kernels/rms_norm.h"
#include "../gpu/device_tensor.h"
#endif

namespace dsv4h {
namespace {

struct Params {
  int64_t rows = 7, dim = 256;
  double eps = 1e-6;
  double min_scale = 1e-4, max_scale = 10;
  template <typename F>
  void fields(F& f) {
    f("rows", rows, "token rows M");
    f("dim", dim, "row width D: 256 tiny dim, 128 tiny q_lora_rank, 512 head_dim (kv norm), 4096, 7168");
    f("eps", eps, "norm_eps (DeepSeek-V4: 1e-6), given to the kernel as fp32");
    f("min_scale", min_scale, "smallest row standard deviation (rows log-uniform in [min_scale, max_scale])");
    f("max_scale", max_scale, "largest row standard deviation");
  }
};
using NormCase = CaseOf<Params>;

void check_sizes(const NormCase& c) {
  const auto bad = [&](const std::string& why) { return BadInput("rms_norm: " + why + " in " + c.str()); };
  if (c.rows < 0) throw bad("rows must be >= 0");
  if (c.dim <= 0 || c.dim > (1 << 20)) throw bad("dim must be in [1, 2^20]");
  if (!(c.eps >= 0 && c.eps < 1)) throw bad("eps must be in [0, 1)");
  if (!(c.min_scale > 0 && c.min_scale <= c.max_scale && c.max_scale <= 1e3))
    throw bad("min_scale and max_scale must satisfy 0 < min_scale <= max_scale <= 1000");
  // The reference holds the rows in double precision too: 2^28 elements are 2 GB.
  if (c.rows > (int64_t{1} << 28) / c.dim) throw bad("rows * dim above 2^28 elements");
}

// Rows of scales spread over decades, as activations are: rows of small scale are where eps
// matters (with eps = 1e-6, a row of scale 1e-2 shows eps added outside the square root as a 0.5%
// error, one of 1e-4 as a factor 100), rows of scale 1 where the mean's divisor does.
TensorMap make_inputs(const NormCase& c) {
  check_sizes(c);
  Rng rng(c.seed());
  HostTensor x(DType::bf16, {c.rows, c.dim});
  const double log_lo = std::log(c.min_scale), log_hi = std::log(c.max_scale);
  for (int64_t r = 0; r < c.rows; ++r) {
    const double scale = std::exp(log_lo + (log_hi - log_lo) * rng.uniform());
    for (int64_t k = 0; k < c.dim; ++k) x.set(r * c.dim + k, scale * rng.normal());
  }
  // Trained norm weights scatter around 1, some negative.
  HostTensor weight(DType::f32, {c.dim});
  fill_normal(weight, rng, 1.0, 0.5);
  return {{"x", std::move(x)}, {"weight", std::move(weight)}};
}

void validate_inputs(const NormCase& c, const TensorMap& inputs) {
  check_sizes(c);
  require_tensor("rms_norm", inputs, "x", DType::bf16, {c.rows, c.dim});
  require_tensor("rms_norm", inputs, "weight", DType::f32, {c.dim});
  reject_unknown_inputs("rms_norm", inputs, {"x", "weight"});
}

TensorMap make_outputs(const NormCase& c) {
  check_sizes(c);
  return {{"y", HostTensor(DType::bf16, {c.rows, c.dim})}};
}

void run_reference(const NormCase& c, const TensorMap& inputs, TensorMap& outputs) {
  const HostTensor& x_in = inputs.at("x");
  const HostTensor& w_in = inputs.at("weight");
  Eigen::MatrixXd x(c.rows, c.dim);
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t k = 0; k < c.dim; ++k) x(r, k) = x_in.get(r * c.dim + k);
  Eigen::VectorXd w(c.dim);
  for (int64_t k = 0; k < c.dim; ++k) w(k) = w_in.get(k);
  // The kernel is given eps as fp32: the exact result of that eps is the one to round.
  const Eigen::MatrixXd y = reference::rms_norm(x, w, static_cast<double>(static_cast<float>(c.eps)));
  HostTensor& out = outputs.at("y");
  for (int64_t r = 0; r < c.rows; ++r)
    for (int64_t k = 0; k < c.dim; ++k) out.set(r * c.dim + k, y(r, k));
}

// A captured batch is padded with more rows (an engine's stale rows): seeded random ones here, so
// that they are checked like the real rows and show any row that leaks into another.
TensorMap pad_batch(const NormCase& c, const TensorMap& inputs, int64_t bucket) {
  if (bucket < c.rows) throw BadInput("rms_norm: bucket " + std::to_string(bucket) + " < rows");
  const Case padded_case = c.untyped().with("rows", std::to_string(bucket)).with_seed(c.seed() ^ 0x9e3779b97f4a7c15ull);
  TensorMap padded = make_inputs(NormCase(padded_case));
  const HostTensor& x = inputs.at("x");
  std::memcpy(padded.at("x").bytes(), x.bytes(), x.nbytes());
  padded.at("weight") = inputs.at("weight");
  return padded;
}

WorkCount work(const NormCase& c, const TensorMap&) {
  // Reads and writes each bf16 once, reads the weight; a square, a sum and two products each.
  return {static_cast<double>(c.rows * c.dim * 4 + c.dim * 4), static_cast<double>(c.rows * c.dim * 4)};
}

BatchSlice slice_batch(const NormCase& c, const TensorMap& inputs, int64_t begin, int64_t end) {
  return {c.untyped().with("rows", std::to_string(end - begin)),
          {{"x", inputs.at("x").rows(begin, end)}, {"weight", inputs.at("weight")}},
          {{"y", begin}}};
}

#if DSV4H_GPU_LAYER
void launch(const NormCase& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream) {
  RmsNormArgs args;
  args.x = inputs.data<const uint16_t>("x");
  args.weight = inputs.data<const float>("weight");
  args.y = outputs.data<uint16_t>("y");
  args.rows = c.rows;
  args.dim = c.dim;
  args.eps = static_cast<float>(c.eps);
  launch_rms_norm(args, static_cast<hipStream_t>(stream));
}
#endif

}  // namespace

Component rms_norm_component() {
  Descriptor<Params> d;
  d.name = "rms_norm";
  d.summary = "RMSNorm of bf16 rows, fp32 weight: y = w * x * rsqrt(mean(x^2) + eps), fp32 math rounded once";
  d.verify_cases = {
      // The tiny config (model/configs/tiny.json): attn/ffn/MTP norms, q norm, kv norm.
      "rms_norm(rows=1,dim=256)",
      "rms_norm(rows=37,dim=256)",
      "rms_norm(rows=64,dim=128)",
      "rms_norm(rows=64,dim=512)",
      // Flash (dim 4096, q_lora_rank 1024) and Pro (dim 7168, q_lora_rank 1536).
      "rms_norm(rows=8,dim=4096)",
      "rms_norm(rows=16,dim=1024)",
      "rms_norm(rows=5,dim=7168)",
      "rms_norm(rows=16,dim=1536)",
      // Scale-1 rows, where dividing by D - 1 shows (D/(D-1))^0.5 - 1 = 1/(2D): 0.5 ulp at D = 128.
      "rms_norm(rows=300,dim=128,min_scale=1,max_scale=1)",
      // Off the vector path: D not a multiple of 8; and many rows sharing blocks.
      "rms_norm(rows=9,dim=100)",
      "rms_norm(rows=3,dim=1)",
      "rms_norm(rows=70000,dim=8)",
  };
  d.batch_param = "rows";
  d.replay_case = "rms_norm(rows=1,dim=256)";
  d.mutants = {
      DSV4H_MUTANT(eps_outside_sqrt, "rms_norm.hip", "1 / (sqrt(mean(x^2)) + eps) instead of rsqrt(mean(x^2) + eps)"),
      DSV4H_MUTANT(mean_over_dim_minus_1, "rms_norm.hip", "the sum of squares divided by D - 1, not D"),
  };
  d.make_inputs = make_inputs;
  d.validate_inputs = validate_inputs;
  d.make_outputs = make_outputs;
  d.reference = run_reference;
  d.pad_batch = pad_batch;
  d.work = work;
  d.slice_batch = slice_batch;
  d.relation_cases = {
      "batch_invariance(chunks=3):rms_norm(rows=40,dim=512)",
  };
#if DSV4H_GPU_LAYER
  d.gpu = launch;
#endif
  return erase(std::move(d));
}

}  // namespace dsv4h
