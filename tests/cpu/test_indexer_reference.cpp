// The C4 lightning indexer's reference (reference/indexer.h, spec 3.3) and its descriptor: the
// query path's pieces, the mask, topk_transform_512's two regimes, the page translation, a
// property over random scores with deliberate ties (compared as sets, tie-aware), and for each of
// issue 29's indexer mutants the proof that the verify cases tell the buggy math from the right one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "harness/compare.h"
#include "harness/component.h"
#include "harness/errors.h"
#include "harness/random.h"
#include "harness/verify.h"
#include "reference/indexer.h"
#include "reference/kv_cache_indexer.h"
#include "reference/narrow_float.h"
#include "reference/rope.h"

namespace dsv4h {
namespace {

using namespace reference;
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(IndexerReference, HadamardIsOrthonormalAndSylvester) {
  Eigen::MatrixXd x = Eigen::MatrixXd::Random(3, 128);
  EXPECT_LT((hadamard128(hadamard128(x)) - x).norm(), 1e-12);
  EXPECT_NEAR(hadamard128(x).row(1).norm(), x.row(1).norm(), 1e-12);
  Eigen::MatrixXd e = Eigen::MatrixXd::Zero(1, 128);
  e(0, 5) = 1;  // row 5 of the Sylvester matrix: (-1)^popcount(5 & j) / sqrt(128)
  const Eigen::MatrixXd h = hadamard128(e);
  for (int j = 0; j < 128; ++j) EXPECT_DOUBLE_EQ(h(0, j), (__builtin_popcount(5 & j) % 2 ? -1 : 1) / std::sqrt(128.0));
}

TEST(IndexerReference, QueryRopesTheLastHalfThenRotatesAndQuantises) {
  const Eigen::VectorXd freqs = rope_frequencies(rope_for_ratio(4));
  Eigen::MatrixXd q = Eigen::MatrixXd::Random(2, 128);
  const int64_t pos = 777;
  Eigen::MatrixXd roped = q;
  for (int h = 0; h < 2; ++h) {
    Eigen::VectorXd tail = roped.row(h).tail(64).transpose();
    apply_rope(tail, pos, freqs);
    roped.row(h).tail(64) = tail.transpose();
  }
  const Eigen::MatrixXd exact = hadamard128(roped);
  const IndexerQuery out = indexer_query(q, pos, freqs, IndexerQuant::fp8_per_head);
  ASSERT_EQ(out.fp8.size(), 256u);
  for (int h = 0; h < 2; ++h) {
    const double amax = exact.row(h).cwiseAbs().maxCoeff();
    const double scale = std::ldexp(1.0, out.scale_exp[h]);
    EXPECT_LE(amax / 448, scale);  // the smallest power of two that holds amax in e4m3's range
    EXPECT_GT(amax / 448, scale / 2);
    for (int i = 0; i < 128; ++i) {
      EXPECT_EQ(out.fp8[h * 128 + i], reference::double_to_fp8_e4m3(exact(h, i) / scale));
      EXPECT_EQ(out.values(h, i), reference::fp8_e4m3_to_float(out.fp8[h * 128 + i]) * scale);
    }
  }
  // The fp4 option (DeepSeek's reference): e2m1 values times a power of two per 32, within half a step.
  const IndexerQuery fp4 = indexer_query(q, pos, freqs, IndexerQuant::fp4_block32);
  EXPECT_TRUE(fp4.fp8.empty());
  for (int b = 0; b < 4; ++b) {
    const double amax = exact.row(0).segment(32 * b, 32).cwiseAbs().maxCoeff();
    EXPECT_LE((fp4.values.row(0).segment(32 * b, 32) - exact.row(0).segment(32 * b, 32)).cwiseAbs().maxCoeff(),
              amax / 3 + 1e-15);  // half the widest step (2 between 4 and 6) times a scale below amax / 3
  }
}

TEST(IndexerReference, ScoresMaskFromTheVisibleEntriesOn) {
  EXPECT_EQ(c4_visible(0), 0);
  EXPECT_EQ(c4_visible(2), 0);
  EXPECT_EQ(c4_visible(3), 1);  // p + 1 = 4: the first entry, visible to the query at p = 3 itself
  EXPECT_EQ(c4_visible(2047), 512);
  Eigen::MatrixXd q = Eigen::MatrixXd::Random(4, 128), keys = Eigen::MatrixXd::Random(10, 128);
  Eigen::VectorXd w(4);
  w << 0.5, -1, 2, 0.25;
  const Eigen::VectorXd s = indexer_scores(q, w, keys, 6);
  for (int j = 0; j < 10; ++j) {
    double expected = -kInf;
    if (j < 6) {
      expected = 0;
      for (int h = 0; h < 4; ++h) expected += std::max(0.0, q.row(h).dot(keys.row(j))) * w(h);
    }
    if (j < 6) EXPECT_NEAR(s(j), expected, 1e-12) << j;
    else EXPECT_EQ(s(j), -kInf) << j;
  }
  EXPECT_THROW(indexer_scores(q, w, keys, 11), BadInput);
}

TEST(IndexerReference, TopkTakesEveryEntryInOrderUpToTopkThenTheLargest) {
  Eigen::VectorXd s(8);
  s << 1, 7, 3, 7, 5, -kInf, -kInf, -kInf;
  EXPECT_EQ(indexer_topk(s, 3, 4), (std::vector<int32_t>{0, 1, 2, -1}));
  EXPECT_EQ(indexer_topk(s, 4, 4), (std::vector<int32_t>{0, 1, 2, 3}));  // exactly topk: no scoring
  EXPECT_EQ(indexer_topk(s, 5, 4), (std::vector<int32_t>{1, 3, 4, 2}));  // ties to the lower index
  EXPECT_EQ(indexer_topk(s, 0, 2), (std::vector<int32_t>{-1, -1}));
}

TEST(IndexerReference, PageSlotsKeepMinusOneAndRefuseOtherIndices) {
  const int32_t table[3] = {9, 2, 5};
  EXPECT_EQ(c4_page_slots({0, 63, 64, 130, -1}, table, 3), (std::vector<int32_t>{576, 639, 128, 322, -1}));
  EXPECT_THROW(c4_page_slots({192}, table, 3), BadInput);
  EXPECT_THROW(c4_page_slots({-2}, table, 3), BadInput);
}

// Property: over random scores drawn from a few values (so that many tie at the boundary), any
// top-k that breaks ties otherwise passes the set comparison, and replacing a selected index by
// one scored strictly lower fails it. 300 seeded trials; a failure names its trial's seed.
TEST(IndexerReference, PropertyTiesAtTheBoundaryAreSwapsAndNothingElse) {
  for (uint64_t trial = 0; trial < 300; ++trial) {
    Rng rng(1000 + trial);
    const int64_t width = rng.integer(1, 80), visible = rng.integer(0, width), topk = rng.integer(1, 40);
    const int64_t levels = rng.integer(1, 6);
    Eigen::VectorXd scores = Eigen::VectorXd::Constant(width, -kInf);
    for (int64_t j = 0; j < visible; ++j) scores(j) = static_cast<double>(rng.integer(0, levels - 1));
    HostTensor scores_t(DType::f32, {1, width}), expected(DType::i32, {1, topk}), got(DType::i32, {1, topk});
    for (int64_t j = 0; j < width; ++j) scores_t.set(j, scores(j));
    const std::vector<int32_t> raw = indexer_topk(scores, visible, topk);
    // The other tie-break: among equal scores the higher index first.
    std::vector<int32_t> other = raw;
    if (visible > topk) {
      std::vector<int32_t> order(static_cast<size_t>(visible));
      for (int32_t j = 0; j < visible; ++j) order[static_cast<size_t>(j)] = j;
      std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
        return scores(a) > scores(b) || (scores(a) == scores(b) && a > b);
      });
      std::copy(order.begin(), order.begin() + topk, other.begin());
    }
    for (int64_t i = 0; i < topk; ++i) {
      expected.set(i, raw[static_cast<size_t>(i)]);
      got.set(i, other[static_cast<size_t>(i)]);
    }
    const TensorMap held{{"scores", scores_t}};
    const OutputCheck check{ToleranceClass::exact, Comparator::topk_set, 0, "scores"};
    const OutputComparison tied = compare_output("topk", expected, Poison::a, got, Poison::a, check, &held);
    EXPECT_TRUE(tied.passed()) << "trial seed " << 1000 + trial << ": " << tied.summary();
    // A real error: the lowest selected index replaced by an unselected one scored strictly lower.
    if (visible > topk) {
      const std::set<int32_t> chosen(raw.begin(), raw.end());
      const double boundary = scores(raw.back());
      for (int32_t j = 0; j < visible; ++j)
        if (!chosen.count(j) && scores(j) < boundary) {
          got.set(topk - 1, j);
          for (int64_t i = 0; i + 1 < topk; ++i) got.set(i, raw[static_cast<size_t>(i)]);
          EXPECT_FALSE(compare_output("topk", expected, Poison::a, got, Poison::a, check, &held).passed())
              << "trial seed " << 1000 + trial;
          break;
        }
    }
  }
}

// The descriptor's verify cases run on the reference, and each mutant's math recomputed from the
// same inputs: the mutant must fail the descriptor's own comparison on at least one verify case.
struct SelectRun {
  Case c;
  TensorMap inputs, outputs, scores;
  int64_t bs = 0, heads = 0, topk = 0, pages = 0, width = 0;
};

const Component& indexer() { return registry().get("indexer"); }

// The verify cases of a stage with their reference runs, made once for the tests below.
const std::vector<SelectRun>& runs_of_stage(int64_t stage) {
  static std::map<int64_t, std::vector<SelectRun>> made;
  if (made.count(stage)) return made.at(stage);
  std::vector<SelectRun>& runs = made[stage];
  for (const std::string& text : indexer().verify_cases) {
    SelectRun r{parse_case(text), {}, {}, {}};
    if (r.c.integer("stage") != stage) continue;
    r.inputs = indexer().make_inputs(r.c);
    r.outputs = reference_outputs(indexer(), r.c, r.inputs, Poison::a);
    r.scores = topk_scores(indexer(), r.c, r.inputs, r.outputs);
    r.bs = r.c.integer("bs");
    r.heads = r.c.integer("heads");
    r.topk = r.c.integer("index_topk");
    r.pages = r.inputs.at("page_table").shape()[1];
    r.width = r.pages * kC4EntriesPerPage;
    runs.push_back(std::move(r));
  }
  return runs;
}

// The raw indices of row `row` if the mask let `visible` entries through and top-k ran over `n`.
std::vector<int32_t> select_row(const SelectRun& r, int64_t row, int64_t visible, int64_t n) {
  Eigen::MatrixXd q(r.heads, 128), keys = Eigen::MatrixXd::Zero(r.width, 128);
  Eigen::VectorXd w(r.heads);
  const uint8_t* codes = r.inputs.at("q_fp8").bytes();
  for (int64_t h = 0; h < r.heads; ++h) {
    w(h) = r.inputs.at("weights").get(row * r.heads + h);
    for (int i = 0; i < 128; ++i)
      q(h, i) = reference::fp8_e4m3_to_float(codes[(row * r.heads + h) * 128 + i]) * r.inputs.at("q_scale").get(row * r.heads + h);
  }
  std::vector<float> key(128);
  for (int64_t j = 0; j < visible; ++j) {
    const int64_t page = r.inputs.at("page_table").data<int32_t>()[row * r.pages + j / kC4EntriesPerPage];
    indexer_unpack_entry(r.inputs.at("indexer_cache").bytes() + page * indexer_page_bytes(kC4EntriesPerPage),
                         kC4EntriesPerPage, j % kC4EntriesPerPage, key.data());
    for (int i = 0; i < 128; ++i) keys(j, i) = key[static_cast<size_t>(i)];
  }
  return indexer_topk(indexer_scores(q, w, keys, visible), n, r.topk);
}

// How many verify cases the mutated selection fails, under the descriptor's topk_set check.
template <typename Visible, typename N>
int cases_caught(const std::vector<SelectRun>& runs, Visible visible_of, N n_of) {
  int caught = 0;
  for (const SelectRun& r : runs) {
    HostTensor got = r.outputs.at("topk_indices");
    for (int64_t row = 0; row < r.bs; ++row) {
      const int64_t visible = c4_visible(r.inputs.at("positions").data<int32_t>()[row]);
      const std::vector<int32_t> raw = select_row(r, row, visible_of(visible, r), n_of(visible, r));
      std::memcpy(got.data<int32_t>() + row * r.topk, raw.data(), raw.size() * 4);
    }
    const OutputCheck check = output_check(indexer(), r.c, "topk_indices", DType::i32);
    caught += !compare_output("topk_indices", r.outputs.at("topk_indices"), Poison::a, got, Poison::a, check, &r.scores)
                   .passed();
  }
  return caught;
}

// The scores of the prefill case whose rows see 1..75 entries, summed in fp32 in another order than
// the reference's (as a kernel does): a row of one entry whose dots cancel to near 0 has an error of
// its terms' size, which the check allows relative to the terms' magnitudes, not to the result's.
TEST(IndexerScores, Fp32SumsPassTheRowCheckWhereTheyCancel) {
  int relative_to_result_fails = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    const Case c = parse_case("indexer(bs=300,ctx=300,seq_len=300,per_request=300,heads=4,index_topk=16,seed=" +
                              std::to_string(seed) + ")");
    const TensorMap inputs = indexer().make_inputs(c);
    TensorMap expected = reference_outputs(indexer(), c, inputs, Poison::a);
    const TensorMap scores = topk_scores(indexer(), c, inputs, expected);
    HostTensor got = expected.at("scores");
    const int64_t width = got.shape()[1];
    const uint8_t* codes = inputs.at("q_fp8").bytes();
    std::vector<float> key(128);
    for (int64_t row = 0; row < 300; ++row) {
      for (int64_t j = 0; j < c4_visible(inputs.at("positions").data<int32_t>()[row]); ++j) {
        const int64_t page = inputs.at("page_table").data<int32_t>()[row * (width / kC4EntriesPerPage) + j / kC4EntriesPerPage];
        indexer_unpack_entry(inputs.at("indexer_cache").bytes() + page * indexer_page_bytes(kC4EntriesPerPage),
                             kC4EntriesPerPage, j % kC4EntriesPerPage, key.data());
        float score = 0;
        for (int64_t h = 3; h >= 0; --h) {
          float dot = 0;
          for (int i = 127; i >= 0; --i)
            dot += reference::fp8_e4m3_to_float(codes[(row * 4 + h) * 128 + i]) *
                   static_cast<float>(inputs.at("q_scale").get(row * 4 + h)) * key[static_cast<size_t>(i)];
          score += std::max(dot, 0.0f) * static_cast<float>(inputs.at("weights").get(row * 4 + h));
        }
        got.set(row * width + j, score);
      }
    }
    OutputCheck check = output_check(indexer(), c, "scores", DType::f32);
    const OutputComparison r = compare_output("scores", expected.at("scores"), Poison::a, got, Poison::a, check, &scores);
    EXPECT_TRUE(r.passed()) << c.str() << ": " << r.summary();
    check.scores.clear();
    relative_to_result_fails +=
        !compare_output("scores", expected.at("scores"), Poison::a, got, Poison::a, check, &scores).passed();
  }
  EXPECT_GT(relative_to_result_fails, 0) << "no seed cancels: the case no longer shows why the magnitudes are needed";
}

TEST(IndexerMutants, RightMathPassesTheVerifyCases) {
  const std::vector<SelectRun>& runs = runs_of_stage(0);
  ASSERT_GT(runs.size(), 10u);
  EXPECT_EQ(cases_caught(runs, [](int64_t v, const SelectRun&) { return v; }, [](int64_t v, const SelectRun&) { return v; }), 0);
}

TEST(IndexerMutants, MaskOffByOneIsCaught) {
  // j <= (p + 1) / 4: one more entry visible (while the page table has it).
  const auto more = [](int64_t v, const SelectRun& r) { return std::min(v + 1, r.width); };
  EXPECT_GT(cases_caught(runs_of_stage(0), more, more), 0);
}

TEST(IndexerMutants, TopkOverThePaddedWidthIsCaught) {
  EXPECT_GT(cases_caught(runs_of_stage(0), [](int64_t v, const SelectRun&) { return v; },
                         [](int64_t, const SelectRun& r) { return r.width; }),
            0);
}

TEST(IndexerMutants, PagesOf128EntriesAreCaught) {
  int caught = 0;
  for (const SelectRun& r : runs_of_stage(2)) {
    HostTensor got = r.outputs.at("page_indices");
    const HostTensor& raw = r.inputs.at("topk_indices");
    for (int64_t row = 0; row < r.bs; ++row) {
      const std::vector<int32_t> indices(raw.data<int32_t>() + row * r.topk, raw.data<int32_t>() + (row + 1) * r.topk);
      std::vector<int32_t> slots(indices.size(), -1);
      const int32_t* table = r.inputs.at("page_table").data<int32_t>() + row * r.pages;
      for (size_t i = 0; i < indices.size(); ++i)
        if (indices[i] >= 0) slots[i] = table[indices[i] >> 7] * 128 + (indices[i] & 127);
      std::memcpy(got.data<int32_t>() + row * r.topk, slots.data(), slots.size() * 4);
    }
    caught += !compare_output("page_indices", r.outputs.at("page_indices"), Poison::a, got, Poison::a, OutputCheck{}).passed();
  }
  EXPECT_GT(caught, 0);
}

}  // namespace
}  // namespace dsv4h
