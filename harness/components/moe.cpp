// Descriptor of `moe`, the filtered MoE of one expert-parallel rank (spec 8.1-8.4, 2.5): the rank
// holds experts [r E/R, (r+1) E/R) and computes its partial of out = route_scale * sum over a
// token's slots of w W2 SwiGLU(W13 x), every other slot filtered (-1) through GEMM1, the
// activation and GEMM2 alike; an all-reduce over the ranks adds the partials
// (tests/gpu/test_moe_gpu.cpp in sequence on one GPU, tests/gpu/test_moe_ep_nccl.cpp across GPUs).
//
// Inputs are a function of the sizes and the seed, never of ranks or rank: every rank of a run, and
// the unpartitioned run (ranks=1), see the same tokens and weights. The first E/topk tokens take the
// expert groups {j topk, ..., j topk + topk - 1}: each is all-local on the rank that holds its group
// (where topk <= E/R) and all-filtered on every other rank, whatever R.
//
// Outputs: every stage of spec 8.1, so that spec 8.4's three comparisons are made: the local ids
// (exact), gate_up and the activation on local rows (filtered rows: zeros, and unwritten), GEMM2's
// rows (filtered rows exactly 0) and the partial.
#include <cmath>
#include <cstring>
#include <string>

#include "../../reference/moe.h"
#include "../descriptor.h"
#include "index_tensors.h"
#include "../errors.h"
#include "../random.h"
#if DSV4H_GPU_LAYER
#include "../../kernels/moe.h"
#include "../gpu/device_tensor.h"
#endif

namespace dsv4h {
namespace {

constexpr double kSwigluLimit = 10;  // DeepSeek-V4 (spec 1.3, 8.2)

struct Params {
  int64_t tokens = 37, hidden = 256, inter = 64, experts = 8, topk = 2, ranks = 1, rank = 0;
  double route_scale = 1.5, padded = 0.1;
  template <typename F>
  void fields(F& f) {
    f("tokens", tokens, "tokens M (rows of hidden)");
    f("hidden", hidden, "hidden size H");
    f("inter", inter, "expert intermediate size I (gate_up has 2I rows per expert)");
    f("experts", experts, "routed experts E, over all ranks");
    f("topk", topk, "experts per token k");
    f("ranks", ranks, "expert-parallel ranks R (E/R experts each; 1 = unpartitioned)");
    f("rank", rank, "the rank r whose partial this case computes, in [0, R)");
    f("route_scale", route_scale, "routed scaling factor, applied once by the combine");
    f("padded", padded, "share of the tokens after the expert-group ones that are padding (all ids -1)");
  }
};
using MoeCase = CaseOf<Params>;

struct Sizes : Params {
  int64_t rows = 0, local_experts = 0, first_expert = 0;
};

Sizes sizes_of(const MoeCase& c) {
  Sizes s;
  static_cast<Params&>(s) = c;
  const auto bad = [&](const std::string& why) { return BadInput("moe: " + why + " in " + c.str()); };
  if (s.tokens < 0) throw bad("tokens must be >= 0");
  if (s.hidden < 1 || s.hidden > 8192) throw bad("hidden must be in [1, 8192] (a GEMM block stages one row)");
  if (s.inter < 1 || s.inter > 8192) throw bad("inter must be in [1, 8192] (a GEMM block stages one row)");
  if (s.experts < 1 || s.experts > 1024) throw bad("experts must be in [1, 1024]");
  if (s.topk < 1 || s.topk > s.experts) throw bad("topk must be in [1, experts]");
  if (s.ranks < 1 || s.ranks > s.experts || s.experts % s.ranks != 0) throw bad("ranks must divide experts");
  if (s.rank < 0 || s.rank >= s.ranks) throw bad("rank must be in [0, ranks)");
  if (!(s.route_scale > 0 && std::isfinite(s.route_scale))) throw bad("route_scale must be > 0 and finite");
  if (!(s.padded >= 0 && s.padded <= 1)) throw bad("padded must be in [0, 1]");
  if (s.tokens > (int64_t{1} << 31) / s.topk) throw bad("tokens * topk must be below 2^31");
  s.rows = s.tokens * s.topk;
  s.local_experts = s.experts / s.ranks;
  s.first_expert = s.rank * s.local_experts;
  return s;
}

// The sizes of a case whose inputs and reference are made on the host: the reference holds the
// rows' stages and the weights in double precision, 2^27 elements each. The GPU launcher and work()
// take larger ones (tests/bench/bench_moe.cpp: DeepSeek-V4-Flash's experts, device inputs).
Sizes host_sizes_of(const MoeCase& c) {
  const Sizes s = sizes_of(c);
  if (s.tokens > (int64_t{1} << 27) / (s.topk * (3 * s.inter + s.hidden)))
    throw BadInput("moe: tokens * topk * (3 inter + hidden) above 2^27 elements in " + c.str());
  if (s.experts * 3 * s.inter * s.hidden > (int64_t{1} << 27))
    throw BadInput("moe: experts * 3 inter * hidden above 2^27 weights in " + c.str());
  return s;
}

TensorMap make_inputs(const MoeCase& c) {
  const Sizes s = host_sizes_of(c);
  Rng rng(c.seed());
  HostTensor hidden(DType::bf16, {s.tokens, s.hidden});
  fill_normal(hidden, rng, 0, 1);
  HostTensor ids(DType::i32, {s.tokens, s.topk});
  HostTensor weights(DType::f32, {s.tokens, s.topk});
  std::vector<int32_t> experts(static_cast<size_t>(s.experts));
  const int64_t groups = s.experts / s.topk;
  for (int64_t m = 0; m < s.tokens; ++m) {
    for (int64_t e = 0; e < s.experts; ++e) experts[e] = static_cast<int32_t>(e);
    // A partial Fisher-Yates shuffle: topk distinct experts, as a top-k selection gives.
    const int64_t base = m < groups ? m * s.topk : 0;
    const int64_t pool = m < groups ? s.topk : s.experts;
    for (int64_t slot = 0; slot < s.topk; ++slot) std::swap(experts[base + slot], experts[base + rng.integer(slot, pool - 1)]);
    const bool padding = m >= groups && rng.uniform() < s.padded;
    double sum = 0;
    std::vector<double> w(static_cast<size_t>(s.topk));
    for (auto& v : w) sum += v = 0.1 + rng.uniform();
    for (int64_t slot = 0; slot < s.topk; ++slot) {
      ids.data<int32_t>()[m * s.topk + slot] = padding ? -1 : experts[base + slot];
      weights.set(m * s.topk + slot, w[slot] / sum);  // w / w.sum(), route_scale not folded in (spec 2.5)
    }
  }
  // Gate and up values with a standard deviation of 6 (0.6 L): about a tenth beyond the clamp.
  HostTensor gate_up_weights(DType::bf16, {s.experts, 2 * s.inter, s.hidden});
  fill_normal(gate_up_weights, rng, 0, 6 / std::sqrt(static_cast<double>(s.hidden)));
  HostTensor down_weights(DType::bf16, {s.experts, s.hidden, s.inter});
  fill_normal(down_weights, rng, 0, 1 / std::sqrt(static_cast<double>(s.inter)));
  return {{"hidden", std::move(hidden)}, {"topk_ids", std::move(ids)}, {"topk_weights", std::move(weights)},
          {"gate_up_weights", std::move(gate_up_weights)}, {"down_weights", std::move(down_weights)}};
}

void validate_inputs(const MoeCase& c, const TensorMap& inputs) {
  const Sizes s = sizes_of(c);
  require_tensor("moe", inputs, "hidden", DType::bf16, {s.tokens, s.hidden});
  require_tensor("moe", inputs, "topk_ids", DType::i32, {s.tokens, s.topk});
  require_tensor("moe", inputs, "topk_weights", DType::f32, {s.tokens, s.topk});
  require_tensor("moe", inputs, "gate_up_weights", DType::bf16, {s.experts, 2 * s.inter, s.hidden});
  require_tensor("moe", inputs, "down_weights", DType::bf16, {s.experts, s.hidden, s.inter});
  reject_unknown_inputs("moe", inputs, {"hidden", "topk_ids", "topk_weights", "gate_up_weights", "down_weights"});
  const int32_t* ids = inputs.at("topk_ids").data<int32_t>();
  for (int64_t i = 0; i < s.rows; ++i)
    if (ids[i] < -1 || ids[i] >= s.experts)
      throw BadInput("moe: topk_ids" + inputs.at("topk_ids").index_string(i) + " = " + std::to_string(ids[i]) +
                     ": a global expert id in [0, experts), or -1 for a padded token");
}

TensorMap make_outputs(const MoeCase& c) {
  const Sizes s = sizes_of(c);
  return {{"local_ids", HostTensor(DType::i32, {s.rows})},
          {"gate_up", HostTensor(DType::bf16, {s.rows, 2 * s.inter})},
          {"act", HostTensor(DType::bf16, {s.rows, s.inter})},
          {"down", HostTensor(DType::f32, {s.rows, s.hidden})},
          {"out", HostTensor(DType::f32, {s.tokens, s.hidden})}};
}

Eigen::MatrixXd matrix_of(const HostTensor& t, int64_t offset, int64_t rows, int64_t cols) {
  Eigen::MatrixXd m(rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < cols; ++k) m(r, k) = t.get(offset + r * cols + k);
  return m;
}

void write_matrix(HostTensor& t, const Eigen::MatrixXd& m) {
  for (Eigen::Index r = 0; r < m.rows(); ++r)
    for (Eigen::Index k = 0; k < m.cols(); ++k) t.set(r * m.cols() + k, m(r, k));
}

void run_reference(const MoeCase& c, const TensorMap& inputs, TensorMap& outputs) {
  const Sizes s = host_sizes_of(c);
  reference::MoeRank rank;
  rank.inter = s.inter;
  rank.experts = s.experts;
  rank.ranks = s.ranks;
  rank.rank = s.rank;
  rank.route_scale = s.route_scale;
  rank.swiglu_limit = kSwigluLimit;
  const Eigen::MatrixXi ids =
      Eigen::Map<const Eigen::Matrix<int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
          inputs.at("topk_ids").data<int32_t>(), s.tokens, s.topk);
  // Only the rank's experts are converted: the reference reads no other.
  std::vector<Eigen::MatrixXd> gate_up_weights(static_cast<size_t>(s.experts)), down_weights(gate_up_weights.size());
  for (int64_t e = s.first_expert; e < s.first_expert + s.local_experts; ++e) {
    gate_up_weights[e] = matrix_of(inputs.at("gate_up_weights"), e * 2 * s.inter * s.hidden, 2 * s.inter, s.hidden);
    down_weights[e] = matrix_of(inputs.at("down_weights"), e * s.hidden * s.inter, s.hidden, s.inter);
  }
  const reference::MoeRankResult r =
      reference::moe_rank(rank, matrix_of(inputs.at("hidden"), 0, s.tokens, s.hidden), ids,
                          matrix_of(inputs.at("topk_weights"), 0, s.tokens, s.topk), gate_up_weights, down_weights);
  for (int64_t row = 0; row < s.rows; ++row) outputs.at("local_ids").data<int32_t>()[row] = r.local_ids[row];
  write_matrix(outputs.at("gate_up"), r.gate_up);
  HostTensor& act = outputs.at("act");
  for (int64_t row = 0; row < s.rows; ++row)
    if (r.kept[row])
      for (int64_t k = 0; k < s.inter; ++k) act.set(row * s.inter + k, r.act(row, k));
  write_matrix(outputs.at("down"), r.down);
  write_matrix(outputs.at("out"), r.out);
}

// gate_up: an fp32 sum over hidden rounded once to bf16, against the exact sum rounded once. They
// differ only where the sum's error (per row at most (4 sqrt(H) + 1) 2^-24, 2^-16 for H <= 4096)
// moves the value across a rounding point: then by one ulp, what bf16_rounded_once's row bound
// allows per element; an element further apart is one whose magnitude is below that error, and
// such elements are at most 2^-16 of the row. The activation reads those values: where an input
// differs by an ulp, the output moves by about an ulp (silu(g) u is at most 1.3 times as sensitive
// to a relative change of g as to one of u, and elements where it is more, g < -2, are small), and
// its own rounding is bf16_rounded_once's. GEMM2 and the combine: fp32_over_bf16_stage over the
// activation, with K = inter (GEMM2's sum), and inter + topk for the combine's further sum. The
// tensor-core GEMMs (kernels/moe_mma.h) sum in 32-term chunks added in K order with fp32 adds that
// round to nearest, a chunk's own sum within a few fp32 ulps of it (the tensor core may truncate,
// but each chunk restarts from zero): the same fp32 error budget, far below these classes' bf16
// terms. The CPU test replays both paths' arithmetic (tests/cpu/test_moe_reference.cpp) within them.
std::map<std::string, OutputCheck> checks(const MoeCase& c) {
  return {{"gate_up", {ToleranceClass::bf16_rounded_once, Comparator::row_rel_l2, 0, ""}},
          {"act", {ToleranceClass::bf16_rounded_once, Comparator::row_rel_l2, 0, ""}},
          {"down", {ToleranceClass::fp32_over_bf16_stage, Comparator::row_rel_l2, c.inter, ""}},
          {"out", {ToleranceClass::fp32_over_bf16_stage, Comparator::row_rel_l2, c.inter + c.topk, ""}}};
}

// An engine pads a captured batch with tokens whose ids are all -1 (mask_topk_ids, spec 8.3); their
// hidden rows and routed weights hold NaN, so that a stage reading them shows it.
TensorMap pad_batch(const MoeCase& c, const TensorMap& inputs, int64_t bucket) {
  const Sizes s = sizes_of(c);
  if (bucket < s.tokens) throw BadInput("moe: bucket " + std::to_string(bucket) + " < tokens");
  const auto padded = [&](const std::string& name, int64_t cols, double fill) {
    const HostTensor& real = inputs.at(name);
    HostTensor t(real.dtype(), {bucket, cols});
    std::memcpy(t.bytes(), real.bytes(), real.nbytes());
    for (int64_t i = real.numel(); i < t.numel(); ++i) t.set(i, fill);
    return t;
  };
  TensorMap out;
  out.emplace("hidden", padded("hidden", s.hidden, NAN));
  out.emplace("topk_ids", padded("topk_ids", s.topk, -1));
  out.emplace("topk_weights", padded("topk_weights", s.topk, NAN));
  out.emplace("gate_up_weights", inputs.at("gate_up_weights"));
  out.emplace("down_weights", inputs.at("down_weights"));
  return out;
}

WorkCount work(const MoeCase& c, const TensorMap& inputs) {
  const Sizes s = sizes_of(c);
  const int32_t* ids = inputs.at("topk_ids").data<int32_t>();
  int64_t kept_rows = 0;
  std::vector<bool> used(static_cast<size_t>(s.local_experts));
  for (int64_t row = 0; row < s.rows; ++row)
    if (ids[row] >= s.first_expert && ids[row] < s.first_expert + s.local_experts) {
      ++kept_rows;
      used[ids[row] - s.first_expert] = true;
    }
  int64_t used_experts = 0;
  for (bool u : used) used_experts += u;
  // The least traffic: the tokens, ids and weights once, each used expert's weights once, the stages
  // written and read once (filtered rows: zeros written), the partial written.
  const double bytes = s.tokens * s.hidden * 2.0 + s.rows * 8.0 + used_experts * 3.0 * s.inter * s.hidden * 2 +
                       s.rows * (4.0 + 2 * s.inter * 2 + s.hidden * 4 * 2) + kept_rows * s.inter * 2.0 * 2 +
                       s.tokens * s.hidden * 4.0;
  const double flops = kept_rows * (6.0 * s.inter * s.hidden + 4.0 * s.inter) + s.rows * s.hidden * 2.0;
  return {bytes, flops};
}

BatchSlice slice_batch(const MoeCase& c, const TensorMap& inputs, int64_t begin, int64_t end) {
  const int64_t k = c.topk;
  return {c.untyped().with("tokens", std::to_string(end - begin)),
          {{"hidden", inputs.at("hidden").rows(begin, end)},
           {"topk_ids", inputs.at("topk_ids").rows(begin, end)},
           {"topk_weights", inputs.at("topk_weights").rows(begin, end)},
           {"gate_up_weights", inputs.at("gate_up_weights")},
           {"down_weights", inputs.at("down_weights")}},
          {{"local_ids", begin * k}, {"gate_up", begin * k}, {"act", begin * k}, {"down", begin * k}, {"out", begin}}};
}

#if DSV4H_GPU_LAYER
void launch(const MoeCase& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream) {
  const Sizes s = sizes_of(c);
  MoeArgs args;
  args.hidden = inputs.data<const uint16_t>("hidden");
  args.topk_ids = inputs.data<const int32_t>("topk_ids");
  args.topk_weights = inputs.data<const float>("topk_weights");
  // The rank reads its own experts only: the weights from its first expert on.
  args.gate_up_weights = inputs.data<const uint16_t>("gate_up_weights") + s.first_expert * 2 * s.inter * s.hidden;
  args.down_weights = inputs.data<const uint16_t>("down_weights") + s.first_expert * s.hidden * s.inter;
  args.local_ids = outputs.data<int32_t>("local_ids");
  args.gate_up = outputs.data<uint16_t>("gate_up");
  args.act = outputs.data<uint16_t>("act");
  args.down = outputs.data<float>("down");
  args.out = outputs.data<float>("out");
  args.tokens = s.tokens;
  args.hidden_size = s.hidden;
  args.inter = s.inter;
  args.topk = s.topk;
  args.first_expert = s.first_expert;
  args.local_experts = s.local_experts;
  args.route_scale = static_cast<float>(s.route_scale);
  args.swiglu_limit = static_cast<float>(kSwigluLimit);
  launch_moe(args, static_cast<hipStream_t>(stream));
}
#endif

}  // namespace

Component moe_component() {
  Descriptor<Params> d;
  d.name = "moe";
  d.summary = "filtered MoE of one expert-parallel rank: local ids, GEMM1, filtered SwiGLU, GEMM2 x weight, "
              "combine x route_scale; the partial an all-reduce adds";
  d.verify_cases = {
      // The tiny model's MoE (spec 1.3: dim 256, 8 experts, topk 2, inter 64), unpartitioned and
      // on ranks of 2, 4 and 8, first, middle and last.
      "moe(tokens=37,hidden=256,inter=64,experts=8,topk=2,ranks=1,rank=0)",
      "moe(tokens=37,hidden=256,inter=64,experts=8,topk=2,ranks=2,rank=0)",
      "moe(tokens=37,hidden=256,inter=64,experts=8,topk=2,ranks=2,rank=1)",
      "moe(tokens=37,hidden=256,inter=64,experts=8,topk=2,ranks=4,rank=2)",
      "moe(tokens=37,hidden=256,inter=64,experts=8,topk=2,ranks=8,rank=0)",
      "moe(tokens=37,hidden=256,inter=64,experts=8,topk=2,ranks=8,rank=7)",
      // M * k < E + 1 (spec 8.4's small-batch branch) and one token. (No token at all is the CPU
      // test's: a case that compares nothing would pass the noop mutant.)
      "moe(tokens=1,hidden=64,inter=32,experts=8,topk=2,ranks=1,rank=0)",
      "moe(tokens=3,hidden=64,inter=32,experts=16,topk=4,ranks=4,rank=1)",
      // Sizes off every tile (64 columns, 32 lanes, the activation's 8-wide vectors; the tensor-core
      // decode tiles' 16 rows, 32 columns and 32-wide steps of K), six experts per token as
      // DeepSeek-V4 routes, many padded tokens; hidden 33 takes the scalar GEMMs on every GPU.
      "moe(tokens=129,hidden=200,inter=40,experts=16,topk=6,ranks=2,rank=1,route_scale=2.5,padded=0.3)",
      "moe(tokens=67,hidden=33,inter=7,experts=32,topk=6,ranks=8,rank=5)",
      "moe(tokens=300,hidden=512,inter=256,experts=16,topk=6,ranks=4,rank=3,padded=0.05)",
      // The decode tiles' steps of K (moe_mma.h) past their 8 slots and ending part-full: GEMM1's
      // K = 456 is 15 steps of 32, the last 8 wide (GEMM2's K = 136: 5 steps, the last 8 wide).
      "moe(tokens=40,hidden=456,inter=136,experts=8,topk=6,ranks=1,rank=0)",
      // The tensor-core GEMMs' prefill tiles (64 rows x 128 columns, moe_grouping.h: 128 rows or
      // more a local expert) off every edge: K (hidden, inter) not a multiple of the 32-wide steps,
      // N (2 inter, hidden) not of the 128 columns, the experts' rows not of the 64 rows.
      "moe(tokens=160,hidden=136,inter=72,experts=4,topk=2,ranks=2,rank=1,padded=0.2)",
      // The grouping's scan where a lane counts several experts (33 and 65 groups over 32 lanes:
      // the Flash rank's 32 local experts take that branch), on prefill and decode tiles; and `out`
      // exactly full with the grouping (hidden = topk + 2 local_experts + 4: 3 + 3 + 2 int32s).
      "moe(tokens=700,hidden=80,inter=64,experts=32,topk=6,ranks=1,rank=0,padded=0.1)",
      "moe(tokens=20,hidden=144,inter=64,experts=128,topk=6,ranks=2,rank=1)",
      "moe(tokens=1,hidden=8,inter=8,experts=2,topk=2,ranks=2,rank=0)",
  };
  d.batch_param = "tokens";
  d.replay_case = "moe(tokens=1,hidden=64,inter=32,experts=8,topk=2,ranks=2,rank=1)";
  d.mutants = {
      DSV4H_MUTANT(moe_down_reads_filtered, "moe_down.hip moe_down_mma.hip", "GEMM2 computes filtered rows from the activation's unwritten rows instead of writing zeros (spec 8.3)"),
      DSV4H_MUTANT(moe_route_scale_twice, "moe_combine.hip", "route_scale applied twice (spec 2.5, 8.4)"),
      DSV4H_MUTANT(moe_global_id_as_local, "moe_local_ids.hip", "the global expert id used as the local index: the rank's offset not subtracted"),
  };
  d.gpu_tests = "*MoeGpu*";
  d.bench_binary = "bench_moe";
  d.bench_filter = "BM_moe|BM_copy_same_bytes_moe|BM_copy_kernel_same_bytes_moe|BM_empty_kernel|BM_dependent_loads";
  // Goals (ci/goals.py) on tests/bench/bench_moe.cpp's shapes: DeepSeek-V4-Flash's experts on rank
  // 0 of 8 ("flash") and the tiny model's ("tiny", spec 1.3). Flash decode reads its used experts'
  // weights (50 MB each) and little else: memory-bound, judged against the copy of its bytes. Tiny
  // decode is five launches over data in L2: launch-bound, judged against five empty kernels' time.
  // Flash prefill against the larger of its byte and matrix-rate floors (the peers' floor_us: a copy
  // of its bytes, its FLOPs at the dense bf16 rate of torch.mm), and every shape ahead of every peer
  // (tests/peers/moe.py: torch eager, torch.compile, Triton).
  d.goals = R"json([
    {"text": "moe flash decode tokens={tokens}: >= 80% of copy bandwidth", "measure": "copy_fraction", "bound": 0.8,
     "benchmark": "BM_moe_decode/tokens:{tokens}/hidden:4096/inter:2048/experts:256/topk:6/ranks:8/manual_time",
     "floors": ["BM_copy_same_bytes_moe/tokens:{tokens}/hidden:4096/inter:2048/experts:256/topk:6/ranks:8/manual_time"],
     "each": [[{"tokens": 1}, {"tokens": 8}, {"tokens": 64}, {"tokens": 256}]]},
    {"text": "moe tiny decode tokens={tokens}: <= 5x an empty kernel (its five launches)", "measure": "ratio_to_empty",
     "bound": 5, "benchmark": "BM_moe_decode/tokens:{tokens}/hidden:256/inter:64/experts:8/topk:2/ranks:1/manual_time",
     "empty": "BM_empty_kernel/manual_time", "floors": ["BM_dependent_loads/depth:2/manual_time"],
     "each": [[{"tokens": 1}, {"tokens": 8}, {"tokens": 64}, {"tokens": 256}]]},
    {"text": "moe flash prefill tokens={tokens}: within 2x the larger of its byte and matrix-rate floors ({peer:.1f} us)",
     "measure": "faster_than_peer", "bound": 2.0, "peers": "peers.moe", "against": "floor_us",
     "where": {"op": "prefill", "hidden": 4096},
     "benchmark": "BM_moe_prefill/tokens:{tokens}/hidden:{hidden}/inter:{inter}/experts:{experts}/topk:{topk}/ranks:{ranks}/manual_time"},
    {"text": "moe {op} tokens={tokens} hidden={hidden}: ahead of every peer (best: {best_peer}, {best_peer_us:.1f} us)",
     "measure": "faster_than_peers", "bound": 1.0, "peers": "peers.moe", "against": ["eager_us", "compile_us", "triton_us"],
     "benchmark": "BM_moe_{op}/tokens:{tokens}/hidden:{hidden}/inter:{inter}/experts:{experts}/topk:{topk}/ranks:{ranks}/manual_time"}
  ])json";
  d.make_inputs = make_inputs;
  d.validate_inputs = validate_inputs;
  d.make_outputs = make_outputs;
  d.reference = run_reference;
  d.checks = checks;
  d.pad_batch = pad_batch;
  d.work = work;
  d.slice_batch = slice_batch;
  // The second: the whole batch takes the tensor-core GEMMs' prefill tiles (64 rows), its thirds
  // the decode tiles (16 rows; kernels/moe_grouping.h), which must sum every element alike.
  d.relation_cases = {
      "batch_invariance(chunks=3):moe(tokens=37,hidden=64,inter=32,experts=8,topk=2,ranks=2,rank=1)",
      "batch_invariance(chunks=3):moe(tokens=160,hidden=136,inter=72,experts=4,topk=2,ranks=2,rank=1)",
  };
#if DSV4H_GPU_LAYER
  d.gpu = launch;
#endif
  return erase(std::move(d));
}

}  // namespace dsv4h
