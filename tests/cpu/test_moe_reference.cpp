// The MoE reference (reference/moe.h, harness/components/moe.cpp) on the CPU: the ranks' partials
// add up to the unpartitioned output, filtered rows are exactly zero, the expert-group tokens are
// all-local on one rank and all-filtered on the others; and the device's arithmetic, replayed on the
// CPU in fp32 for both GEMM paths (the scalar kernels' lane-strided fmas and butterfly; the
// tensor-core kernels' 32-term chunks, each mma's sum truncated toward zero, added in K order),
// passes every verify case under the descriptor's tolerances, while each mutant's math fails at
// least three verify cases on either path.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>

#include "harness/compare.h"
#include "harness/component.h"
#include "harness/dtype.h"
#include "harness/errors.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

enum class Variant { right, down_reads_filtered, route_scale_twice, global_id_as_local };
enum class Path { scalar, mma };

const Component& moe() { return registry().get("moe"); }

Case moe_case(const std::string& text, uint64_t seed = 3) { return parse_case(text, seed); }

// One output column as the GEMM kernels sum it: 32 lanes striding over the row with fp32 fmas, then
// a butterfly over the lanes (kernels/moe_gate_up.hip, moe_down.hip).
float lane_dot(const std::vector<float>& x, const HostTensor& w, int64_t offset) {
  float lanes[32] = {};
  for (int64_t h = 0; h < static_cast<int64_t>(x.size()); ++h)
    lanes[h % 32] = std::fmaf(x[h], static_cast<float>(w.get(offset + h)), lanes[h % 32]);
  for (int width = 16; width > 0; width /= 2) {
    float next[32];
    for (int l = 0; l < 32; ++l) next[l] = lanes[l] + lanes[l ^ width];
    std::copy(next, next + 32, lanes);
  }
  return lanes[0];
}

// One mma's sum of 16 exact bf16 products onto the partial c, modelled at its worst: every addend
// aligned to the largest one's exponent and truncated to 24 bits there, the sum truncated toward
// zero to fp32. A NaN addend (a poisoned activation) makes the sum NaN, as on the device.
float mma_sum_worst(double c, std::vector<double> terms) {
  terms.push_back(c);
  for (double t : terms)
    if (std::isnan(t)) return NAN;
  int emax = INT_MIN;
  for (double t : terms)
    if (t != 0) emax = std::max(emax, std::ilogb(t));
  if (emax == INT_MIN) return 0.f;
  const double quantum = std::ldexp(1.0, emax - 23);
  double sum = 0;
  for (double t : terms) sum += std::trunc(t / quantum) * quantum;
  float r = static_cast<float>(sum);
  if (std::fabs(static_cast<double>(r)) > std::fabs(sum)) r = std::nextafter(r, 0.f);
  return r;
}

// The same column as the tensor-core kernels sum it (kernels/moe_mma.h): chunks of 32 terms, each
// two mma of 16 products onto the chunk's partial (from zero), then one fp32 add of the chunk into
// the running sum, in K order; each mma's own sum at its worst (mma_sum_worst).
float mma_dot(const std::vector<float>& x, const HostTensor& w, int64_t offset) {
  const int64_t k = static_cast<int64_t>(x.size());
  float running = 0.f;
  for (int64_t k0 = 0; k0 < k; k0 += 32) {
    float part = 0.f;
    for (int64_t k1 = k0; k1 < std::min(k0 + 32, k); k1 += 16) {
      std::vector<double> products;
      for (int64_t i = k1; i < std::min(k1 + 16, k); ++i) products.push_back(static_cast<double>(x[i]) * w.get(offset + i));
      part = mma_sum_worst(part, std::move(products));
    }
    running += part;
  }
  return running;
}

float swiglu(float g, float u) {
  g = g > 10.f ? 10.f : g;
  u = u > 10.f ? 10.f : (u < -10.f ? -10.f : u);
  return g / (1.f + std::exp(-g)) * u;
}

// The GPU path's outputs as the kernels compute them, over outputs poisoned with Poison::a. Each
// row's values depend on its own inputs only, so the tensor-core path's grouping of the rows into
// tiles, which changes no value, is not replayed.
TensorMap device_replay(const Case& c, const TensorMap& in, Variant variant, Path path) {
  const auto dot = path == Path::scalar ? lane_dot : mma_dot;
  const int64_t M = c.integer("tokens"), H = c.integer("hidden"), I = c.integer("inter"), k = c.integer("topk");
  const int64_t local_experts = c.integer("experts") / c.integer("ranks"), first = c.integer("rank") * local_experts;
  const float scale = static_cast<float>(c.real("route_scale"));
  TensorMap out = checked_outputs(moe(), c, in);
  fill_poison(out, Poison::a);
  for (int64_t row = 0; row < M * k; ++row) {
    const int64_t id = in.at("topk_ids").data<int32_t>()[row];
    const bool local = id >= first && id < first + local_experts;
    const int64_t index = variant == Variant::global_id_as_local ? std::min(id, local_experts - 1) : id - first;
    const int32_t e = local ? static_cast<int32_t>(index) : -1;
    out.at("local_ids").data<int32_t>()[row] = e;
    std::vector<float> x(H), a(I);
    for (int64_t h = 0; h < H; ++h) x[h] = static_cast<float>(in.at("hidden").get((row / k) * H + h));
    for (int64_t n = 0; n < 2 * I; ++n)
      out.at("gate_up").set(row * 2 * I + n, e < 0 ? 0.0 : dot(x, in.at("gate_up_weights"), ((first + e) * 2 * I + n) * H));
    if (e >= 0)
      for (int64_t i = 0; i < I; ++i)
        out.at("act").set(row * I + i, swiglu(static_cast<float>(out.at("gate_up").get(row * 2 * I + i)),
                                              static_cast<float>(out.at("gate_up").get(row * 2 * I + I + i))));
    const int32_t down_expert = e < 0 && variant == Variant::down_reads_filtered ? 0 : e;
    for (int64_t i = 0; i < I; ++i) a[i] = static_cast<float>(out.at("act").get(row * I + i));
    const float w = static_cast<float>(in.at("topk_weights").get(row));
    for (int64_t h = 0; h < H; ++h)
      out.at("down").set(row * H + h, down_expert < 0 ? 0.0 : w * dot(a, in.at("down_weights"), ((first + down_expert) * H + h) * I));
  }
  for (int64_t m = 0; m < M; ++m)
    for (int64_t h = 0; h < H; ++h) {
      float sum = 0.f;
      for (int64_t s = 0; s < k; ++s) sum += static_cast<float>(out.at("down").get((m * k + s) * H + h));
      if (variant == Variant::route_scale_twice) sum *= scale;
      out.at("out").set(m * H + h, scale * sum);
    }
  return out;
}

// Whether every output of the replay passes the descriptor's checks; the largest budget used.
bool replay_passes(const Case& c, Variant variant, Path path, double* budget = nullptr, std::string* failures = nullptr) {
  const TensorMap in = moe().make_inputs(c);
  const TensorMap expected = reference_outputs(moe(), c, in, Poison::a);
  const TensorMap got = device_replay(c, in, variant, path);
  bool passed = true;
  for (const auto& [name, e] : expected) {
    const OutputComparison r = compare_output(name, e, Poison::a, got.at(name), Poison::a,
                                              output_check(moe(), c, name, e.dtype()));
    if (budget) *budget = std::max(*budget, r.budget_used);
    if (!r.passed() && failures) *failures += r.summary() + "\n";
    passed = passed && r.passed();
  }
  return passed;
}

TEST(MoeReference, RanksPartialsAddUpToTheUnpartitionedOutput) {
  for (int64_t ranks : {2, 4, 8}) {
    const std::string sizes = "moe(tokens=45,hidden=48,inter=24,experts=16,topk=4,padded=0.2,ranks=";
    const Case whole = moe_case(sizes + "1,rank=0)");
    const TensorMap in = moe().make_inputs(whole);
    const TensorMap expected = reference_outputs(moe(), whole, in, Poison::a);
    std::vector<double> sum(static_cast<size_t>(expected.at("out").numel()));
    for (int64_t rank = 0; rank < ranks; ++rank) {
      const Case part = moe_case(sizes + std::to_string(ranks) + ",rank=" + std::to_string(rank) + ")");
      ASSERT_EQ(moe().make_inputs(part).at("topk_ids").bits(7), in.at("topk_ids").bits(7)) << "inputs depend on the rank";
      const TensorMap out = reference_outputs(moe(), part, in, Poison::a);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += out.at("out").get(static_cast<int64_t>(i));
    }
    for (size_t i = 0; i < sum.size(); ++i)
      EXPECT_NEAR(sum[i], expected.at("out").get(static_cast<int64_t>(i)), 1e-5 * (1 + std::fabs(sum[i]))) << ranks << " " << i;
  }
}

TEST(MoeReference, FilteredRowsAreZeroAndGroupTokensAllLocalOrAllFiltered) {
  // E = 16, topk 2: tokens 0..7 take the groups {2j, 2j+1}; with 4 ranks rank 1 holds experts 4..7.
  const Case c = moe_case("moe(tokens=20,hidden=32,inter=16,experts=16,topk=2,ranks=4,rank=1,padded=0.5)");
  const TensorMap in = moe().make_inputs(c);
  const TensorMap out = reference_outputs(moe(), c, in, Poison::a);
  const int32_t* ids = out.at("local_ids").data<int32_t>();
  for (int64_t row = 0; row < 40; ++row) {
    const bool kept = ids[row] >= 0;
    if (row < 16) {  // of the group tokens, only 2 and 3
      EXPECT_EQ(kept, row / 2 == 2 || row / 2 == 3) << "row " << row;
    }
    EXPECT_EQ(is_poison(out.at("act"), row * 16, Poison::a), !kept) << "row " << row;
    if (kept) continue;
    EXPECT_EQ(out.at("gate_up").get(row * 32), 0.0);
    for (int64_t h = 0; h < 32; ++h) EXPECT_EQ(out.at("down").bits(row * 32 + h), 0u) << "row " << row;
  }
  for (int64_t m : {0, 1, 4, 7})  // all-filtered on this rank: exactly 0
    for (int64_t h = 0; h < 32; ++h) EXPECT_EQ(out.at("out").bits(m * 32 + h), 0u) << m;
  const TensorMap whole = reference_outputs(moe(), moe_case("moe(tokens=20,hidden=32,inter=16,experts=16,topk=2,padded=0.5)"), in, Poison::a);
  for (int64_t m : {2, 3})  // all-local: the whole output
    for (int64_t h = 0; h < 32; ++h) EXPECT_EQ(out.at("out").get(m * 32 + h), whole.at("out").get(m * 32 + h));
}

TEST(MoeReference, RouteScaleIsAppliedOnce) {
  const std::string sizes = "moe(tokens=5,hidden=16,inter=8,experts=4,topk=2,route_scale=";
  const TensorMap in = moe().make_inputs(moe_case(sizes + "1)"));
  const TensorMap one = reference_outputs(moe(), moe_case(sizes + "1)"), in, Poison::a);
  const TensorMap scaled = reference_outputs(moe(), moe_case(sizes + "2.5)"), in, Poison::a);
  for (int64_t i = 0; i < one.at("out").numel(); ++i)
    EXPECT_NEAR(scaled.at("out").get(i), 2.5 * one.at("out").get(i), 1e-6 * std::fabs(scaled.at("out").get(i)));
}

// Every verify case on both paths, whichever the device would pick for it (moe_grouping.h); the
// largest share of a budget each path uses is recorded (scalar_budget_used, mma_budget_used).
TEST(MoeReference, DeviceArithmeticPassesEveryVerifyCase) {
  for (Path path : {Path::scalar, Path::mma}) {
    double worst = 0;
    for (const std::string& text : moe().verify_cases)
      for (uint64_t seed : {1, 2}) {
        const Case c = moe_case(text, seed);
        double budget = 0;
        std::string failures;
        EXPECT_TRUE(replay_passes(c, Variant::right, path, &budget, &failures))
            << c.str() << " path " << static_cast<int>(path) << "\n" << failures;
        EXPECT_LT(budget, 0.5) << c.str() << " path " << static_cast<int>(path) << ": the derived bounds leave at least a factor 2";
        worst = std::max(worst, budget);
      }
    testing::Test::RecordProperty(path == Path::scalar ? "scalar_budget_used" : "mma_budget_used", std::to_string(worst));
  }
}

TEST(MoeReference, EveryMutantsMathFailsAVerifyCase) {
  for (Path path : {Path::scalar, Path::mma})
    for (Variant variant : {Variant::down_reads_filtered, Variant::route_scale_twice, Variant::global_id_as_local}) {
      int failing = 0;  // three failing cases suffice: the rest are not replayed
      for (const std::string& text : moe().verify_cases)
        if (failing < 3) failing += !replay_passes(moe_case(text), variant, path);
      EXPECT_GE(failing, 3) << "mutant " << static_cast<int>(variant) << " path " << static_cast<int>(path);
    }
}

TEST(MoeReference, NoTokensNoOutputRows) {
  const Case c = moe_case("moe(tokens=0,hidden=64,inter=32,experts=8,topk=2,ranks=2,rank=1)");
  const TensorMap out = reference_outputs(moe(), c, moe().make_inputs(c), Poison::a);
  for (const auto& [name, t] : out) EXPECT_EQ(t.numel(), 0) << name;
}

TEST(MoeReference, BadInputNamesTheField) {
  const auto message = [](const std::string& text) {
    try {
      moe().make_inputs(moe_case(text));
    } catch (const BadInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("moe(experts=8,ranks=3)").find("ranks"), std::string::npos);
  EXPECT_NE(message("moe(ranks=2,rank=2)").find("rank must"), std::string::npos);
  EXPECT_NE(message("moe(topk=9)").find("topk"), std::string::npos);
  EXPECT_NE(message("moe(hidden=9000)").find("hidden"), std::string::npos);
  const Case c = moe_case("moe(tokens=2,hidden=8,inter=8,experts=4,topk=2)");
  TensorMap in = moe().make_inputs(c);
  in.at("topk_ids").data<int32_t>()[3] = 4;
  EXPECT_THROW(moe().validate_inputs(c, in), BadInput);
}

// The reference's host limits bound the inputs made on the host, not the work count: the benchmark
// counts DeepSeek-V4-Flash's experts on rank 0 of 8 through work() from the routing alone.
TEST(MoeReference, WorkCountsSizesBeyondTheReferences) {
  const Case c = moe_case("moe(tokens=1,hidden=4096,inter=2048,experts=256,topk=6,ranks=8,rank=0)");
  EXPECT_THROW(moe().make_inputs(c), BadInput);
  TensorMap in;
  in.emplace("topk_ids", HostTensor(DType::i32, {1, 6}));
  for (int32_t slot = 0; slot < 6; ++slot) in.at("topk_ids").data<int32_t>()[slot] = 43 * slot;  // 0 local
  const WorkCount w = moe().work(c, in);
  // One expert's weights (3 x 2048 x 4096 bf16), the token, the ids and weights, the stages of six
  // rows, one kept row's activation, the partial.
  const double expected = 3.0 * 2048 * 4096 * 2 + 4096 * 2 + 6 * 8 + 6 * (4 + 2 * 2048 * 2 + 4096 * 8) + 2048 * 4 +
                          4096 * 4;
  EXPECT_EQ(w.bytes_moved, expected);
  EXPECT_EQ(w.flops, 6.0 * 2048 * 4096 + 4.0 * 2048 + 6 * 4096 * 2);
}

}  // namespace
}  // namespace dsv4h
