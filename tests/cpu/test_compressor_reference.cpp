// The compressor reference (spec 3.2, 4.3, 9.1): the dense closed form against the formula written
// out, and the state machine (prefill, chunked prefill at every split, token-by-token decode)
// against the dense form bit for bit in the packed pool. Then the component (its descriptor): every
// issue-29 bug computed by the reference changes the outputs of some verify case, so the GPU run
// can catch its mutant.
#include <gtest/gtest.h>

#include <cmath>
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
