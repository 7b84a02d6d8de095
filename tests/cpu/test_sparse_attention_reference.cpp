// The sparse attention reference (spec 3.4, 9.2): the formula on hand-made keys, the sink through
// 1/(1 + exp(sink - lse)), masking of -1 and of columns beyond a length, a row with no valid key,
// the inverse rope; and, for each mutant of issue 30, that its bug applied to the reference
// changes some verify case's outputs beyond their tolerance (so the GPU run can catch it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "harness/component.h"
#include "harness/errors.h"
#include "harness/tolerance.h"
#include "reference/kv_cache_model1.h"
#include "reference/narrow_float.h"
#include "reference/rope.h"
#include "reference/sparse_attention.h"

namespace dsv4h::reference {
namespace {

constexpr int64_t kPage = 2;  // tokens per page of the hand-made pools (C128's page)

// A pool of `latents` (512 values each, exact in bf16 and fp8 so that dequantising is exact).
struct HandPool {
  std::vector<uint8_t> bytes;
  explicit HandPool(const std::vector<std::vector<double>>& latents) {
    const int64_t pages = (static_cast<int64_t>(latents.size()) + kPage - 1) / kPage;
    bytes.assign(static_cast<size_t>(pages * model1_page_bytes(kPage)), 0);
    for (size_t t = 0; t < latents.size(); ++t) {
      std::vector<uint16_t> bf16(kAttentionDims);
      for (int d = 0; d < kAttentionDims; ++d) bf16[d] = double_to_bf16(latents[t][d]);
      model1_pack_token(bf16.data(), kPage, static_cast<int64_t>(t) % kPage,
                        bytes.data() + static_cast<int64_t>(t) / kPage * model1_page_bytes(kPage));
    }
  }
  int64_t slots() const { return static_cast<int64_t>(bytes.size()) / model1_page_bytes(kPage) * kPage; }
};

std::vector<double> latent(double nope, double rope) {
  std::vector<double> v(kAttentionDims, nope);
  for (int d = kAttentionDims - kRopeDim; d < kAttentionDims; ++d) v[d] = rope;
  return v;
}

struct OneRow {
  HandPool pool;
  std::vector<int32_t> indices;
  int32_t length;
  std::vector<uint16_t> q;
  float sink;
  int32_t position = 0;
  SparseAttentionProblem problem() {
    SparseAttentionProblem pr;
    pr.rows = 1;
    pr.heads = 1;
    pr.q = q.data();
    pr.window = {pool.bytes.data(), kPage, pool.slots(), indices.data(), static_cast<int64_t>(indices.size()), &length};
    pr.sink = &sink;
    pr.positions = &position;
    return pr;
  }
};

std::vector<uint16_t> query(double nope, double rope) {
  std::vector<uint16_t> q(kAttentionDims);
  const std::vector<double> v = latent(nope, rope);
  for (int d = 0; d < kAttentionDims; ++d) q[d] = double_to_bf16(v[d]);
  return q;
}

TEST(SparseAttentionReference, SoftmaxWithTheSinkInTheDenominator) {
  // Two keys 1 and 2 (every dim), q = 1/16: scores 512 / 16 * 512^-0.5 * {1, 2}.
  OneRow row{HandPool({latent(1, 1), latent(2, 2)}), {0, 1}, 2, query(1.0 / 16, 1.0 / 16), 1.5f};
  const SparseAttentionResult r = sparse_attention(row.problem());
  const double s1 = 32 / std::sqrt(512.0), s2 = 2 * s1;
  const double lse = std::log(std::exp(s1) + std::exp(s2));
  const double mean = (std::exp(s1) * 1 + std::exp(s2) * 2) / (std::exp(s1) + std::exp(s2));
  EXPECT_NEAR(r.lse[0], lse, 1e-12);
  // Position 0: the rope slice's inverse rotation is the identity.
  for (int d = 0; d < kAttentionDims; ++d) EXPECT_NEAR(r.out[d], mean / (1 + std::exp(1.5 - lse)), 1e-12) << d;
}

TEST(SparseAttentionReference, MasksMinusOneAndColumnsBeyondTheLength) {
  OneRow row{HandPool({latent(1, 1), latent(2, 2), latent(3, 3)}), {0, -1, 2, 1}, 3, query(0, 0), -100.f};
  // q = 0: every valid key weighs the same; key 1 sits beyond the length, -1 is no key.
  const SparseAttentionResult r = sparse_attention(row.problem());
  EXPECT_NEAR(r.out[0], 2.0, 1e-12);
  EXPECT_NEAR(r.lse[0], std::log(2.0), 1e-12);
  SparseAttentionBugs unmasked;
  unmasked.minus_one_unmasked = true;  // a zero key of score 0 takes a third of the mass
  EXPECT_NEAR(sparse_attention(row.problem(), unmasked).out[0], 4.0 / 3, 1e-12);
}

TEST(SparseAttentionReference, ARowWithNoValidKeyWritesZeroAndAFiniteLse) {
  OneRow row{HandPool({latent(1, 1)}), {-1, 0}, 1, query(1, 1), 0.f};
  const SparseAttentionResult r = sparse_attention(row.problem());
  for (double v : r.out) EXPECT_EQ(v, 0.0);
  EXPECT_EQ(r.lse[0], -static_cast<double>(FLT_MAX));
  row.length = 0;
  EXPECT_EQ(sparse_attention(row.problem()).lse[0], -static_cast<double>(FLT_MAX));
}

TEST(SparseAttentionReference, DeRotatesTheRopeSliceByThePosition) {
  OneRow row{HandPool({latent(0.5, 0.25)}), {0}, 1, query(1, 1), -100.f};
  row.position = 777;
  const SparseAttentionResult r = sparse_attention(row.problem());
  Eigen::VectorXd slice = Eigen::VectorXd::Constant(kRopeDim, 0.25);
  apply_rope(slice, 777, rope_frequencies(rope_for_ratio(0)), true);
  for (int d = 0; d < kRopeDim; ++d) EXPECT_NEAR(r.out[kAttentionDims - kRopeDim + d], slice(d), 1e-12) << d;
  EXPECT_NEAR(r.out[0], 0.5, 1e-12);
}

TEST(SparseAttentionReference, RefusesIndicesOutsideThePoolAndBadLengths) {
  OneRow row{HandPool({latent(1, 1)}), {0, 5}, 2, query(1, 1), 0.f};
  EXPECT_THROW(sparse_attention(row.problem()), BadInput);
  row.indices = {0, -2};
  EXPECT_THROW(sparse_attention(row.problem()), BadInput);
  row.indices = {0, 1};
  row.length = 3;
  EXPECT_THROW(sparse_attention(row.problem()), BadInput);
  row.length = 1;  // column 1 (slot 1, the pool's spare slot) beyond the length is not read
  EXPECT_NO_THROW(sparse_attention(row.problem()));
}

// The descriptor's inputs of a verify case as the reference's problem.
SparseAttentionProblem problem_of(const Case& c, const TensorMap& in) {
  SparseAttentionProblem pr;
  pr.rows = c.integer("bs");
  pr.heads = c.integer("heads");
  pr.q = in.at("q").data<uint16_t>();
  const auto scope = [&](const std::string& prefix, const std::string& cache, int64_t page) {
    const HostTensor& idx = in.at(prefix + "_indices");
    return AttentionScope{in.at(cache).data<uint8_t>(), page,
                          in.at(cache).numel() / model1_page_bytes(page) * page, idx.data<int32_t>(),
                          idx.shape()[1], in.at(prefix + "_lengths").data<int32_t>()};
  };
  pr.window = scope("swa", "swa_cache", 256);
  pr.compress_ratio = c.integer("ratio");
  if (pr.compress_ratio != 0) pr.extra = scope("extra", "extra_cache", pr.compress_ratio == 4 ? 64 : 2);
  pr.sink = in.at("sink").data<float>();
  pr.positions = in.at("positions").data<int32_t>();
  return pr;
}

// Whether `bugged` differs from `right` beyond the descriptor's checks: a row of `out` (rounded to
// bf16 as the kernel's output is) beyond 2^-7 relative L2, a row of lse beyond its bound, or a NaN.
bool distinguishable(const SparseAttentionResult& right, const SparseAttentionResult& bugged, int64_t rows) {
  const double out_bound = 0x1.0p-7, lse_bound = 1e-4;  // lse's is far looser than its class's
  const size_t out_row = right.out.size() / static_cast<size_t>(rows), lse_row = right.lse.size() / static_cast<size_t>(rows);
  for (int64_t n = 0; n < rows; ++n) {
    double diff = 0, norm = 0, ldiff = 0, lnorm = 0;
    for (size_t i = n * out_row; i < (n + 1) * out_row; ++i) {
      const double e = bf16_to_float(double_to_bf16(right.out[i])), g = bf16_to_float(double_to_bf16(bugged.out[i]));
      if (std::isnan(g)) return true;
      diff += (e - g) * (e - g), norm += e * e;
    }
    for (size_t i = n * lse_row; i < (n + 1) * lse_row; ++i) {
      if (std::isnan(bugged.lse[i])) return true;
      ldiff += (right.lse[i] - bugged.lse[i]) * (right.lse[i] - bugged.lse[i]), lnorm += right.lse[i] * right.lse[i];
    }
    if (diff > out_bound * out_bound * norm || ldiff > lse_bound * lse_bound * lnorm) return true;
  }
  return false;
}

// That each mutant's bug of issue 30, applied to the reference, changes some verify case whose text
// contains `only` beyond its tolerance.
void expect_every_mutant_caught(const std::string& only) {
  const Component& component = registry().get("sparse_attention");
  struct Named {
    std::string name;
    SparseAttentionBugs bugs;
  };
  std::vector<Named> mutants(8);
  mutants[0].name = "sink_ignored", mutants[0].bugs.sink_ignored = true;
  mutants[1].name = "sink_in_numerator", mutants[1].bugs.sink_in_numerator = true;
  mutants[2].name = "minus_one_unmasked", mutants[2].bugs.minus_one_unmasked = true;
  mutants[3].name = "c4_one_too_many", mutants[3].bugs.extra_one_too_many = true;
  mutants[4].name = "window_short", mutants[4].bugs.window_short = true;
  mutants[5].name = "rope_not_inverted", mutants[5].bugs.rope_not_inverted = true;
  mutants[6].name = "empty_row_nan", mutants[6].bugs.empty_row_nan = true;
  mutants[7].name = "scale_448", mutants[7].bugs.scale_448 = true;
  // The last two mutants are the split decode's protocol (the arrival count not reset) and merge
  // (the last split left out), which have no math of the reference's to break: on the GPU, any
  // decode case of a large grid run twice catches the first, of a row with several splits the
  // second.
  ASSERT_EQ(component.mutants.size(), mutants.size() + 2);
  EXPECT_EQ(component.mutants[mutants.size()].name, "split_arrival_not_reset");
  EXPECT_EQ(component.mutants.back().name, "split_merge_one_short");
  std::vector<bool> caught(mutants.size(), false);
  for (const std::string& text : component.verify_cases) {
    if (std::all_of(caught.begin(), caught.end(), [](bool b) { return b; })) break;
    if (text.find(only) == std::string::npos) continue;
    const Case c = parse_case(text, 1);
    const TensorMap inputs = component.make_inputs(c);
    const SparseAttentionProblem pr = problem_of(c, inputs);
    const SparseAttentionResult right = sparse_attention(pr);
    for (size_t m = 0; m < mutants.size(); ++m)
      if (!caught[m]) caught[m] = distinguishable(right, sparse_attention(pr, mutants[m].bugs), pr.rows);
  }
  for (size_t m = 0; m < mutants.size(); ++m) {
    EXPECT_TRUE(caught[m]) << mutants[m].name << ": no verify case (with \"" << only << "\") tells its bug from the reference";
    EXPECT_EQ(component.mutants[m].name, mutants[m].name);
  }
}

TEST(SparseAttentionReference, EveryMutantsBugChangesAVerifyCase) { expect_every_mutant_caught(""); }

// Each mutant also changes the prefill kernel (its DSV4H_MUTANT line names both sources): the
// prefill verify cases alone must tell each bug from the right math.
TEST(SparseAttentionReference, EveryMutantsBugChangesAPrefillVerifyCase) { expect_every_mutant_caught("prefill=1"); }

}  // namespace
}  // namespace dsv4h::reference
