// History files and the reports over them: the reader (units, aggregates ignored, fraction of
// the ceiling), the step located at its commit in a 20-night history, and what the HTML and
// markdown reports hold.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "harness/errors.h"
#include "perf/html.h"
#include "perf/markdown.h"
#include "perf/summary.h"
#include "report_synthetic.h"

namespace dsv4h::report {
namespace {

using testing::draw_times;

const std::string kStepped = "BM_filtered_silu_mul/rows:384/kept_permille:1000/manual_time";
const std::string kRegressed = "BM_filtered_silu_mul/rows:3072/kept_permille:1000/manual_time";
const std::string kSteady = "BM_empty_kernel/manual_time";

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(ReportHistory, ReadsRepetitionsAndIgnoresAggregates) {
  const std::string dir = testing::fresh_dir("reader");
  const Night night = load_night(testing::write_night(dir, 0, {{kSteady, {2.0, 4.0, 3.0}}}));
  EXPECT_EQ(night.commit, testing::night_commit(0));
  EXPECT_EQ(night.device_name, "Synthetic GPU");
  ASSERT_EQ(night.benchmarks.count(kSteady), 1u);
  const BenchmarkSamples& s = night.benchmarks.at(kSteady);
  EXPECT_EQ(s.times_us, (std::vector<double>{2.0, 4.0, 3.0}));  // written in ns, read in us
  ASSERT_EQ(s.fraction_of_ceiling.size(), 3u);
  EXPECT_NEAR(s.fraction_of_ceiling[0], 1e6 / 2.0 * 1e-3 / 4000.0, 1e-12);  // 500 GB/s of 4000
  EXPECT_EQ(night.copy_ceiling_GBps, 4000.0);
  EXPECT_FALSE(night.bf16_matmul_TFLOPs);
}

TEST(ReportHistory, HistoryFilesNeedCommitAndDate) {
  const std::string dir = testing::fresh_dir("no_commit");
  nlohmann::json doc = testing::night_document("c1", "2026-10-01", {{kSteady, {1.0, 1.1}}});
  doc.erase("commit");
  write_json_file(dir + "/night.json", doc);
  EXPECT_NO_THROW(load_night(dir + "/night.json"));
  try {
    load_history(dir);
    FAIL() << "a history without commit was read";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("night.json: field \"commit\""), std::string::npos) << e.what();
  }
  EXPECT_THROW(load_history(testing::fresh_dir("empty")), BadInput);
}

// One night copied under a second name would count twice in every trend.
TEST(ReportHistory, ANightRecordedTwiceIsRefused) {
  const std::string dir = testing::fresh_dir("twice");
  const nlohmann::json doc = testing::night_document("c1abcd", "2026-10-01", {{kSteady, {1.0, 1.1}}});
  write_json_file(dir + "/2026-10-01-c1abcd.json", doc);
  write_json_file(dir + "/copy.json", doc);
  try {
    load_history(dir);
    FAIL() << "a night recorded twice was read";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("field \"commit\" and \"date\" are those of"), std::string::npos) << e.what();
  }
}

// Each field a night's ordering or its fractions rest on is checked, even where another field
// would take precedence: a night dated "03/12/2026" sorted after "2026-12-02" and swapped the
// latest night and its baseline.
TEST(ReportHistory, MalformedFieldsAreNamed) {
  const std::string dir = testing::fresh_dir("malformed");
  const auto expect_named = [&](const std::function<void(nlohmann::json&)>& spoil, const std::string& field) {
    nlohmann::json doc = testing::night_document("c1", "2026-10-01", {{kSteady, {1.0, 1.1}}});
    spoil(doc);
    write_json_file(dir + "/night.json", doc);
    try {
      load_night(dir + "/night.json");
      ADD_FAILURE() << "read a night with a malformed " << field;
    } catch (const BadInput& e) {
      EXPECT_NE(std::string(e.what()).find("field \"" + field + "\""), std::string::npos) << e.what();
    }
  };
  expect_named([](nlohmann::json& d) { d["date"] = "03/12/2026"; }, "date");
  expect_named([](nlohmann::json& d) { d["date"] = "2026-13-01"; }, "date");
  expect_named([](nlohmann::json& d) { d["date"] = "2026-02-29"; }, "date");  // 2026 is no leap year
  expect_named([](nlohmann::json& d) { d["date"] = "2026-04-31"; }, "date");
  expect_named([](nlohmann::json& d) { d["benchmarks"][0]["real_time"] = 1.7e308; }, "benchmarks[0].real_time");
  expect_named([](nlohmann::json& d) { d["benchmarks"][1]["repetition_index"] = 0; }, "benchmarks[1].name");
  expect_named([](nlohmann::json& d) { d["benchmarks"][0]["copy_ceiling_GBps"] = -1; }, "benchmarks[0].copy_ceiling_GBps");
  expect_named([](nlohmann::json& d) { d["benchmarks"][0]["run_name"] = ""; }, "benchmarks[0].name");
  expect_named([](nlohmann::json& d) { d["accuracy"] = {{{"case", "x"}, {"budget_used", -1}}}; }, "accuracy[0].budget_used");
}

// 20 nights of 3 processes 1% apart, with 3% noise within each: kStepped 10% slower from night
// 13 on, kRegressed 6% slower on the last night only (no step: the median of the last two nights
// moved 3%, less than a step's 5%), kSteady unchanged. Nights are written out of date order on
// purpose.
std::string twenty_nights(uint64_t seed) {
  const std::string dir = testing::fresh_dir("twenty_" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const auto night = [&](double median_us) { return testing::draw_processes(rng, median_us, 0.01, 0.03); };
  for (int i = 19; i >= 0; --i)
    testing::write_night(dir, i, {{kStepped, night(i >= 13 ? 8.8 : 8.0)},
                                  {kRegressed, night(i == 19 ? 26.5 : 25.0)},
                                  {kSteady, night(4.6)}});
  return dir;
}

TEST(ReportHistory, StepIsLocatedAtItsCommit) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    const HistorySummary s = summarize_history(twenty_nights(seed), "", {});
    ASSERT_EQ(s.nights.size(), 20u);
    EXPECT_EQ(s.nights.front().commit, testing::night_commit(0));
    for (const Trend& t : s.trends) {
      if (t.name != kStepped) {
        EXPECT_FALSE(t.step) << t.name << ": " << t.step_range;
        continue;
      }
      ASSERT_TRUE(t.step) << "seed " << seed;
      EXPECT_EQ(s.nights[t.step->index].commit, testing::night_commit(13)) << "seed " << seed;
      EXPECT_EQ(t.step_range, "after " + testing::night_commit(12) + " (" + testing::night_date(12) + ") up to " +
                                  testing::night_commit(13) + " (" + testing::night_date(13) + ")");
    }
  }
}

TEST(ReportHistory, BaselineIsThePreviousNightOrTheGivenFile) {
  const std::string dir = twenty_nights(1);
  const HistorySummary s = summarize_history(dir, "", {});
  EXPECT_EQ(s.baseline_index, 18u);
  EXPECT_EQ(s.comparison.benchmarks[0].name, kRegressed);
  EXPECT_EQ(s.comparison.benchmarks[0].verdict, Verdict::slower);
  const std::string first = dir + "/" + testing::night_date(0) + "-" + testing::night_commit(0) + ".json";
  const HistorySummary from_first = summarize_history(dir, first, {});
  EXPECT_EQ(from_first.baseline_index, 0u);
  EXPECT_EQ(from_first.comparison.base_label, testing::night_commit(0) + " (" + testing::night_date(0) + ")");
}

// A change of timing method starts a new history: the first night timed on the device is its own
// baseline, the next one is compared with it, and the nights timed at the host's launch rate are
// left out of the trends (where the change would be a step in every benchmark).
TEST(ReportHistory, NightsTimedOtherwiseAreLeftOut) {
  const std::string dir = testing::fresh_dir("timing_history");
  std::mt19937_64 rng(17);
  testing::write_night(dir, 0, {{kSteady, draw_times(rng, 3.5, 0.01)}});
  testing::write_night(dir, 1, {{kSteady, draw_times(rng, 3.5, 0.01)}});
  testing::write_night(dir, 2, {{kSteady, draw_times(rng, 1.4, 0.01)}}, "device");
  HistorySummary s = summarize_history(dir, "", {});
  ASSERT_EQ(s.nights.size(), 1u);
  EXPECT_EQ(s.nights_timed_otherwise, 2u);
  EXPECT_EQ(s.baseline_index, std::optional<size_t>(0));
  ASSERT_EQ(s.comparison.benchmarks.size(), 1u);
  EXPECT_EQ(s.comparison.benchmarks[0].verdict, Verdict::unchanged);
  testing::write_night(dir, 3, {{kSteady, draw_times(rng, 2.4, 0.01)}}, "device");
  s = summarize_history(dir, "", {});
  EXPECT_EQ(s.nights.front().commit, testing::night_commit(2));
  EXPECT_EQ(s.baseline_index, std::optional<size_t>(0));
  EXPECT_EQ(s.comparison.benchmarks[0].verdict, Verdict::slower);
  EXPECT_FALSE(s.trends[0].step.has_value());  // two nights: no step, and none from the timing change
  EXPECT_NE(render_markdown(s).find("2 earlier nights were timed otherwise"), std::string::npos);
}

// The lent machine is an H100 one night and an H200 the next: a night is compared only with
// nights on its device, and the others are left out of the trends (where the card's difference
// would be a step), counted apart from the nights timed otherwise.
TEST(ReportHistory, NightsOnAnotherCardAreLeftOut) {
  const std::string dir = testing::fresh_dir("device_history");
  std::mt19937_64 rng(19);
  testing::write_night(dir, 0, {{kSteady, draw_times(rng, 3.5, 0.01)}});
  testing::write_night(dir, 1, {{kSteady, draw_times(rng, 1.4, 0.01)}}, "device", "NVIDIA H200");
  testing::write_night(dir, 2, {{kSteady, draw_times(rng, 1.2, 0.01)}}, "device", "NVIDIA H100 80GB HBM3");
  HistorySummary s = summarize_history(dir, "", {});
  ASSERT_EQ(s.nights.size(), 1u);
  EXPECT_EQ(s.nights_timed_otherwise, 1u);
  EXPECT_EQ(s.nights_on_other_cards, 1u);
  EXPECT_EQ(s.comparison.benchmarks[0].verdict, Verdict::unchanged);  // its own baseline, not the H200's 1.4
  testing::write_night(dir, 3, {{kSteady, draw_times(rng, 2.4, 0.01)}}, "device", "NVIDIA H200");
  s = summarize_history(dir, "", {});
  ASSERT_EQ(s.nights.size(), 2u);
  EXPECT_EQ(s.nights.front().commit, testing::night_commit(1));
  EXPECT_EQ(s.comparison.benchmarks[0].verdict, Verdict::slower);  // 1.4 -> 2.4 on the H200
  EXPECT_NE(render_markdown(s).find("1 earlier night was timed otherwise (context.timing) and not shown. 1 earlier "
                                    "night was run on another card (device.name) and not shown."),
            std::string::npos);
  EXPECT_NE(render_html(s).find("1 earlier night was run on another card"), std::string::npos);
}

// A night naming no card (ci/history-record without nvidia-smi's output) matches no card: as the
// latest it is a series of its own, and in the middle of a card's nights it is left out, so the
// baseline is that card's previous night, as ci/nightly's is.
TEST(ReportHistory, NightsNamingNoCardAreASeriesOfTheirOwn) {
  const std::string dir = testing::fresh_dir("unnamed_history");
  std::mt19937_64 rng(29);
  testing::write_night(dir, 0, {{kSteady, draw_times(rng, 1.4, 0.01)}}, "device", "NVIDIA H200");
  testing::write_night(dir, 1, {{kSteady, draw_times(rng, 1.2, 0.01)}}, "device", "NVIDIA H100 80GB HBM3");
  testing::write_night(dir, 2, {{kSteady, draw_times(rng, 3.0, 0.01)}}, "device", "");
  HistorySummary s = summarize_history(dir, "", {});
  ASSERT_EQ(s.nights.size(), 1u);
  EXPECT_EQ(s.nights_on_other_cards, 2u);
  testing::write_night(dir, 3, {{kSteady, draw_times(rng, 1.22, 0.01)}}, "device", "NVIDIA H100 80GB HBM3");
  s = summarize_history(dir, "", {});
  ASSERT_EQ(s.nights.size(), 2u);
  EXPECT_EQ(s.nights_on_other_cards, 2u);
  EXPECT_EQ(s.baseline.commit, testing::night_commit(1));
  EXPECT_EQ(s.comparison.benchmarks[0].verdict, Verdict::unchanged);  // 1.2 -> 1.22, not 3.0 -> 1.22
}

TEST(ReportHistory, HtmlHoldsTableAndOneChartPerBenchmark) {
  const std::string html = render_html(summarize_history(twenty_nights(2), "", {}));
  // The device and the counts before any table; the empty kernel, a floor, in a table of its own.
  EXPECT_NE(html.find("<h1 id=\"device\">Nightly benchmarks on Synthetic GPU</h1>"), std::string::npos);
  EXPECT_LT(html.find("<b class=\"slower\">1 slower</b>, <b>0 faster</b>, <b>2 unchanged</b>"), html.find("<table"));
  const size_t kernels = html.find("<table class=\"summary\" id=\"summary-kernels\">");
  const size_t floors = html.find("<table class=\"summary\" id=\"summary-floors\">");
  ASSERT_LT(kernels, floors);
  EXPECT_GT(html.find(kSteady, kernels), floors);
  EXPECT_EQ(count(html, "<svg class=\"chart\""), 3u);
  EXPECT_EQ(count(html, "<polygon class=\"band\""), 3u);
  EXPECT_EQ(count(html, "class=\"baseline\""), 3u);
  EXPECT_EQ(count(html, "class=\"step\""), 1u);
  // The regression is the first row of the table.
  const size_t body = html.find("<tbody>");
  EXPECT_LT(html.find(kRegressed, body), html.find(kStepped, body));
  EXPECT_LT(html.find("data-verdict=\"slower\"", body), html.find("data-verdict=\"unchanged\"", body));
  // Self-contained: nothing fetched.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
}

TEST(ReportHistory, MarkdownListsRegressionsFirst) {
  const std::string md = render_markdown(summarize_history(twenty_nights(3), "", {}));
  EXPECT_NE(md.find("**1 slower**"), std::string::npos) << md;
  const size_t first_row = md.find("|---|");
  EXPECT_EQ(md.find("| **slower** | `" + kRegressed, first_row), md.find("\n| ", first_row) + 1) << md;
  EXPECT_NE(md.find("after " + testing::night_commit(12)), std::string::npos) << md;
}

// A name holding a table's or a code span's own syntax stays one cell of one row.
TEST(ReportHistory, MarkdownKeepsOddNamesInTheirCell) {
  const std::string dir = testing::fresh_dir("odd_names");
  const std::string odd = "BM_x/`a``b`|c\nd";
  testing::write_night(dir, 0, {{odd, {1.0, 1.1, 1.05}}});
  testing::write_night(dir, 1, {{odd, {1.0, 1.1, 1.05}}, {"only`new", {1.0, 1.1}}});
  const std::string md = render_markdown(summarize_history(dir, "", {}));
  EXPECT_NE(md.find("| unchanged | ```BM_x/`a``b`\\|c d``` | "), std::string::npos) << md;
  EXPECT_NE(md.find("- ``only`new``\n"), std::string::npos) << md;
}

TEST(ReportHistory, FirstNightIsItsOwnBaseline) {
  const std::string dir = testing::fresh_dir("single");
  testing::write_night(dir, 0, {{kSteady, {1.0, 1.1, 1.05}}});
  const HistorySummary s = summarize_history(dir, "", {});
  ASSERT_EQ(s.nights.size(), 1u);
  EXPECT_EQ(s.baseline_index, std::optional<size_t>(0));
  ASSERT_EQ(s.comparison.benchmarks.size(), 1u);
  EXPECT_EQ(s.comparison.benchmarks[0].verdict, Verdict::unchanged);
  EXPECT_NE(render_html(s).find("<svg"), std::string::npos);
}

}  // namespace
}  // namespace dsv4h::report
