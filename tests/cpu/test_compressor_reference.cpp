// The compressor reference (spec 3.2, 4.3, 9.1): the dense closed form against the formula written
// out, and the state machine (prefill, chunked prefill at every split, token-by-token decode)
// against the dense form bit for bit in the packed pool. Then the component (its descriptor): every
// issue-29 bug computed by the reference changes the outputs of some verify case, so the GPU run
// can catch its mutant.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "harness/compare.h"
#include "harness/component.h"
#include "harness/components/compressor.h"
#include "harness/errors.h"
#include "reference/compressor.h"
#include "reference/rms_norm.h"
#include "reference/rope.h"

namespace dsv4h::reference {
namespace {

struct Sequence {
  RowMatrixXf kv, score;
  CompressorWeights weights;
};

Sequence random_sequence(const CompressorConfig& config, int64_t tokens, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0, 1);
  const int width = compressor_series(config.ratio) * config.dims;
  Sequence s;
  s.kv = RowMatrixXf(tokens, width);
  s.score = RowMatrixXf(tokens, width);
  s.weights.ape = RowMatrixXf(config.ratio, width);
  s.weights.norm_weight = Eigen::VectorXd(config.dims);
  for (int64_t i = 0; i < s.kv.size(); ++i) s.kv.data()[i] = normal(gen);
  for (int64_t i = 0; i < s.score.size(); ++i) s.score.data()[i] = 2 * normal(gen);
  for (int64_t i = 0; i < s.weights.ape.size(); ++i) s.weights.ape.data()[i] = normal(gen);
  for (int k = 0; k < config.dims; ++k) s.weights.norm_weight(k) = 1 + 0.25 * normal(gen);
  return s;
}

// Entries by block, packed: what the pool holds of each, one slot per block.
using Packed = std::map<int64_t, std::vector<uint8_t>>;

std::vector<uint8_t> pack_one(const CompressorConfig& config, const Eigen::VectorXd& entry) {
  std::vector<uint8_t> page(compressor_page_bytes(config), 0);
  compressor_pack(config, entry, 0, page.data());
  return page;
}

Packed pack_dense(const CompressorConfig& config, const Sequence& s, int64_t tokens) {
  const Eigen::MatrixXd dense = compress_dense(config, s.kv.topRows(tokens), s.score.topRows(tokens), s.weights);
  Packed out;
  for (int64_t j = 0; j < dense.rows(); ++j) out[j] = pack_one(config, dense.row(j).transpose());
  return out;
}

// Runs the tokens [0, tokens) in the chunks that end at `splits` (ascending, the last = tokens).
Packed pack_chunks(const CompressorConfig& config, const Sequence& s, const std::vector<int64_t>& splits) {
  RowMatrixXf ring = compressor_clean_ring(config);
  Packed out;
  int64_t start = 0;
  for (int64_t end : splits) {
    for (const CompressorEmission& e : compress_extend(config, ring, start, s.kv.middleRows(start, end - start),
                                                       s.score.middleRows(start, end - start), s.weights)) {
      if (config.bug == CompressorBug::none) {
        EXPECT_EQ(start + e.token + 1, (e.block + 1) * config.ratio);
      }
      out[e.block] = pack_one(config, e.value);
    }
    start = end;
  }
  return out;
}

const CompressorConfig kConfigs[] = {{4, 512}, {4, 128}, {128, 512}};
constexpr int64_t kTokens = 300;

TEST(CompressorReference, DenseMatchesTheFormulaWrittenOut) {
  for (const CompressorConfig& config : kConfigs) {
    const Sequence s = random_sequence(config, 260, 7);
    const Eigen::MatrixXd dense = compress_dense(config, s.kv, s.score, s.weights);
    ASSERT_EQ(dense.rows(), 260 / config.ratio);
    const int d = config.dims;
    const Eigen::VectorXd freqs = rope_frequencies({160000, true});
    for (int64_t j : {int64_t{0}, int64_t{1}, dense.rows() - 1}) {
      Eigen::MatrixXd c(1, d);
      for (int k = 0; k < d; ++k) {
        std::vector<std::pair<double, double>> cand;  // (score, kv)
        for (int64_t t = config.ratio * j; t < config.ratio * (j + 1); ++t) {
          const int64_t col = config.ratio == 4 ? d + k : k;
          cand.emplace_back(double{s.score(t, col) + s.weights.ape(t % config.ratio, col)}, s.kv(t, col));
        }
        if (config.ratio == 4 && j > 0)
          for (int64_t t = 4 * j - 4; t < 4 * j; ++t)
            cand.emplace_back(double{s.score(t, k) + s.weights.ape(t % 4, k)}, s.kv(t, k));
        double z = 0, acc = 0;
        for (auto [sc, v] : cand) z += std::exp(sc), acc += std::exp(sc) * v;
        c(0, k) = acc / z;
      }
      Eigen::VectorXd e = rms_norm(c, s.weights.norm_weight, 1e-6).row(0).transpose();
      apply_rope(e.tail(64), config.ratio * j, freqs);
      if (d == 128) {  // the rotation as H_2 ⊗ ... ⊗ H_2 applied by butterflies, / sqrt(128)
        for (int h = 1; h < d; h *= 2)
          for (int i = 0; i < d; i += 2 * h)
            for (int k = i; k < i + h; ++k) {
              const double a = e(k), b = e(k + h);
              e(k) = a + b, e(k + h) = a - b;
            }
        e /= std::sqrt(128.0);
      }
      EXPECT_LT((e - dense.row(j).transpose()).cwiseAbs().maxCoeff(), 1e-12)
          << "ratio " << config.ratio << " d " << d << " entry " << j;
    }
  }
}

TEST(CompressorReference, ConfigurationsOutsideTheModelAreRefused) {
  RowMatrixXf none(0, 1024);
  EXPECT_THROW(compress_dense({8, 512}, none, none, {}), std::invalid_argument);
  EXPECT_THROW(compress_dense({128, 128}, none, none, {}), std::invalid_argument);
  EXPECT_THROW(compressor_clean_ring({4, 256}), std::invalid_argument);
}

// Prefill of every length 1..300 emits floor(L / ratio) entries, each equal to the dense form's.
TEST(CompressorReference, PrefillOfEveryLengthEqualsDense) {
  for (const CompressorConfig& config : kConfigs) {
    const Sequence s = random_sequence(config, kTokens, 11);
    const Packed dense = pack_dense(config, s, kTokens);
    for (int64_t length = 1; length <= kTokens; ++length) {
      const Packed prefill = pack_chunks(config, s, {length});
      ASSERT_EQ(static_cast<int64_t>(prefill.size()), length / config.ratio) << "length " << length;
      for (const auto& [block, bytes] : prefill) ASSERT_EQ(bytes, dense.at(block)) << "length " << length;
    }
  }
}

// Chunked prefill split at every point, the boundary lengths, and decode token by token.
TEST(CompressorReference, ChunkedAtEverySplitAndDecodeEqualPrefill) {
  for (const CompressorConfig& config : kConfigs) {
    const Sequence s = random_sequence(config, kTokens, 13);
    const Packed dense = pack_dense(config, s, kTokens);
    for (int64_t split = 1; split < kTokens; ++split)
      ASSERT_EQ(pack_chunks(config, s, {split, kTokens}), dense) << "ratio " << config.ratio << " split " << split;
    std::vector<int64_t> every_token;
    for (int64_t t = 1; t <= kTokens; ++t) every_token.push_back(t);
    EXPECT_EQ(pack_chunks(config, s, every_token), dense) << "decode, ratio " << config.ratio;
    // Prefill of p + 1 tokens at the spec's boundary lengths, then decode to the end.
    for (int64_t length : {1, 2, 3, 4, 5, 127, 128, 129, 255, 256, 257}) {
      std::vector<int64_t> splits{length};
      for (int64_t t = length + 1; t <= kTokens; ++t) splits.push_back(t);
      EXPECT_EQ(pack_chunks(config, s, splits), dense) << "prefill " << length << " then decode";
    }
  }
}

// Each bug of issue 29 changes the packed entries of the schedule it concerns.
TEST(CompressorReference, EveryBugChangesThePackedEntries) {
  struct Bug {
    CompressorBug bug;
    CompressorConfig config;
    std::vector<int64_t> splits;
  };
  const std::vector<Bug> bugs = {
      {CompressorBug::overlap_half_missing, {4, 512}, {kTokens}},
      {CompressorBug::absent_half_zero_score, {4, 128}, {4}},
      {CompressorBug::rope_last_position, {128, 512}, {257}},
      {CompressorBug::emission_late, {4, 512}, {3, 4, 5, 6, 7, 8}},
      {CompressorBug::chunk_state_dropped, {128, 512}, {130, 257}},
  };
  for (const Bug& b : bugs) {
    const Sequence s = random_sequence(b.config, kTokens, 17);
    CompressorConfig buggy = b.config;
    buggy.bug = b.bug;
    EXPECT_NE(pack_chunks(buggy, s, b.splits), pack_chunks(b.config, s, b.splits)) << static_cast<int>(b.bug);
  }
}

// Entry j as kernels/compressor.hip orders its sums (fp64 on both sides, the CPU's exp and sincos):
// C4 the maximum first, then the candidates in order; C128 eight token groups of 16, each its
// maximum first and its sums in order, each group's sums scaled by exp(its maximum - the overall
// one) and added in group order; the sum of squares by threads of 4 channels, 32-lane
// butterflies, then (p0 + p1) + (p2 + p3) over a d-512 entry's four groups; the rotation of d 128
// by butterflies.
Eigen::VectorXd kernel_order_entry(const CompressorConfig& config, const Sequence& s, int64_t j) {
  const int d = config.dims;
  const float inf = std::numeric_limits<float>::infinity();
  const auto S = [&](int64_t t, int k) { return compressor_state_score(s.score(t, k), s.weights.ape(t % config.ratio, k)); };
  Eigen::VectorXd y(d);
  for (int k = 0; k < d; ++k) {
    if (config.ratio == 4) {
      std::vector<std::pair<float, float>> cand;  // (S, kv)
      for (int64_t t = 4 * j - 4; t < 4 * j; ++t)
        if (t >= 0) cand.emplace_back(S(t, k), s.kv(t, k));
      for (int64_t t = 4 * j; t < 4 * j + 4; ++t) cand.emplace_back(S(t, d + k), s.kv(t, d + k));
      float m = -inf;
      for (const auto& c : cand) m = std::max(m, c.first);
      double z = 0, acc = 0;
      for (const auto& c : cand) {
        const double w = std::exp(double{c.first} - double{m});
        z += w;
        acc += w * double{c.second};
      }
      y(k) = acc / z;
      continue;
    }
    float m[8];
    double z[8], acc[8];
    for (int g = 0; g < 8; ++g) {
      m[g] = -inf, z[g] = 0, acc[g] = 0;
      for (int64_t t = 128 * j + 16 * g; t < 128 * j + 16 * (g + 1); ++t) m[g] = std::max(m[g], S(t, k));
      for (int64_t t = 128 * j + 16 * g; t < 128 * j + 16 * (g + 1); ++t) {
        const double w = std::exp(double{S(t, k)} - double{m[g]});
        z[g] += w;
        acc[g] += w * double{s.kv(t, k)};
      }
    }
    const float top = *std::max_element(m, m + 8);
    double zz = 0, aa = 0;
    for (int g = 0; g < 8; ++g) {
      const double scale = std::exp(double{m[g]} - double{top});
      zz = g == 0 ? z[g] * scale : zz + z[g] * scale;
      aa = g == 0 ? acc[g] * scale : aa + acc[g] * scale;
    }
    y(k) = aa / zz;
  }
  std::vector<double> partial;
  for (int l0 = 0; l0 < d / 4; l0 += 32) {
    std::vector<double> lane(32, 0.0);
    for (int l = 0; l < 32; ++l)
      for (int c = 0; c < 4; ++c) lane[l] += y(4 * (l0 + l) + c) * y(4 * (l0 + l) + c);
    for (int offset = 16; offset > 0; offset /= 2) {
      std::vector<double> next(32);
      for (int l = 0; l < 32; ++l) next[l] = lane[l] + lane[l ^ offset];
      lane = next;
    }
    partial.push_back(lane[0]);
  }
  const double squares = d == 512 ? (partial[0] + partial[1]) + (partial[2] + partial[3]) : partial[0];
  const double rms = std::sqrt(squares / d + kCompressorNormEps);
  Eigen::VectorXd e(d);
  for (int k = 0; k < d; ++k) e(k) = y(k) * s.weights.norm_weight(k) / rms;
  apply_rope(e.tail(64), config.ratio * j, rope_frequencies(rope_for_ratio(4)));
  if (d == 128) {
    for (int h = 1; h < d; h *= 2)
      for (int i = 0; i < d; i += 2 * h)
        for (int k = i; k < i + h; ++k) {
          const double a = e(k), b = e(k + h);
          e(k) = a + b, e(k + h) = a - b;
        }
    for (int k = 0; k < d; ++k) e(k) = e(k) / std::sqrt(128.0);
  }
  return e;
}

// The GPU pool is compared exactly with the reference's, though the kernel sums in another order
// (above): a difference of ~1e-16 relative changes a packed byte only where a value lies that near
// a bf16 rounding midpoint. Over thousands of entries, with scores of two spreads (the wider makes
// the groups' maxima differ more), the kernel's order packs every entry as the reference does.
TEST(CompressorReference, EmulatedKernelOrderPacksAsTheReference) {
  for (const CompressorConfig& config : kConfigs) {
    for (const float spread : {1.f, 4.f}) {
      Sequence s = random_sequence(config, config.ratio == 4 ? 2048 : 32768, 23);
      s.score *= spread;
      const Eigen::MatrixXd dense = compress_dense(config, s.kv, s.score, s.weights);
      int64_t differing = 0, reordered = 0;
      for (int64_t j = 0; j < dense.rows(); ++j) {
        const Eigen::VectorXd kernel = kernel_order_entry(config, s, j);
        reordered += kernel != dense.row(j).transpose();
        differing += pack_one(config, kernel) != pack_one(config, dense.row(j).transpose());
      }
      EXPECT_EQ(differing, 0) << "ratio " << config.ratio << " d " << config.dims << " spread " << spread << ": of "
                              << dense.rows() << " entries";
      // Not vacuous: the replayed order does change the fp64 entries (else the packs compare one computation).
      EXPECT_GT(reordered, dense.rows() / 2) << "ratio " << config.ratio << " d " << config.dims;
    }
  }
}

}  // namespace
}  // namespace dsv4h::reference

namespace dsv4h {
namespace {

const Component& compressor() { return registry().get("compressor"); }

// Whether the reference computing with `bug` writes other outputs than the right one on case `c`.
bool bug_shows(const Case& c, int bug) {
  const TensorMap inputs = compressor().make_inputs(c);
  const TensorMap right = reference_outputs(compressor(), c, inputs, Poison::a);
  TensorMap buggy = checked_outputs(compressor(), c, inputs);
  fill_poison(buggy, Poison::a);
  compressor_reference_with_bug(c, inputs, buggy, static_cast<reference::CompressorBug>(bug));
  for (const auto& [name, expected] : right)
    if (!compare_output(name, expected, Poison::a, buggy.at(name), Poison::a, OutputCheck{}).passed()) return true;
  return false;
}

TEST(CompressorComponent, EveryBugIsCaughtByAVerifyCase) {
  for (int bug = 1; bug <= 5; ++bug) {
    int showing = 0;
    for (const std::string& text : compressor().verify_cases) showing += bug_shows(parse_case(text), bug);
    EXPECT_GT(showing, 0) << "bug " << bug << " of reference::CompressorBug changes no verify case's outputs";
  }
}

TEST(CompressorComponent, ChunkedStateIsWhatTheEarlierStepLeft) {
  // A request split into two steps: the second starts from the first's ring_out, and the entries of
  // both together equal those of one prefill (the component's tensors, not only the reference's).
  const Case whole = parse_case("compressor(ratio=4,dims=512,batch=1,tokens=13)", 5);
  TensorMap inputs = compressor().make_inputs(whole);
  const TensorMap one = reference_outputs(compressor(), whole, inputs, Poison::a);
  TensorMap first_inputs = inputs, second_inputs = inputs;
  first_inputs.at("extend_len").data<int32_t>()[0] = 6;
  const TensorMap first = reference_outputs(compressor(), whole, first_inputs, Poison::a);
  second_inputs.at("start").data<int32_t>()[0] = 6;
  second_inputs.at("extend_len").data<int32_t>()[0] = 7;
  const int64_t width = 1024;
  for (int64_t i = 0; i < 7; ++i)
    for (const char* name : {"kv", "score"}) {
      float* x = second_inputs.at(name).data<float>();
      std::copy(x + (6 + i) * width, x + (7 + i) * width, x + i * width);
    }
  int32_t* loc = second_inputs.at("out_loc").data<int32_t>();
  std::copy(loc + 6, loc + 13, loc);
  std::fill(loc + 7, loc + 13, 0);
  const HostTensor& ring_out = first.at("ring_out");
  HostTensor& ring = second_inputs.at("ring");
  for (int64_t i = 0; i < ring.numel(); ++i)
    if (ring_out.bits(i) != poison_bits(DType::f32, Poison::a)) ring.set_bits(i, ring_out.bits(i));
  const TensorMap second = reference_outputs(compressor(), whole, second_inputs, Poison::a);
  const HostTensor& a = first.at("pool");
  const HostTensor& b = second.at("pool");
  HostTensor merged = one.at("pool");
  for (int64_t i = 0; i < merged.numel(); ++i)
    merged.set_bits(i, a.bits(i) != poison_bits(DType::i32, Poison::a) ? a.bits(i) : b.bits(i));
  EXPECT_TRUE(compare_output("pool", one.at("pool"), Poison::a, merged, Poison::a, OutputCheck{}).passed());
}

TEST(CompressorComponent, BadInputNamesTheField) {
  EXPECT_THROW(compressor().make_inputs(parse_case("compressor(ratio=8)")), BadInput);
  EXPECT_THROW(compressor().make_inputs(parse_case("compressor(ratio=128,dims=128)")), BadInput);
  const Case c = parse_case("compressor(batch=2,tokens=4)");
  TensorMap inputs = compressor().make_inputs(c);
  inputs.at("ring_index").data<int32_t>()[1] = inputs.at("ring_index").data<int32_t>()[0];
  try {
    compressor().validate_inputs(c, inputs);
    FAIL() << "a shared ring was accepted";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("ring_index[1]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dsv4h
