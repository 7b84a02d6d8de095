// `dsv4h report compare`: a known regression is flagged, pure noise is not, files present in one
// night only are listed; the command's exit codes (0, 1, 2) checked by running it. The rule's
// calibration (perf/compare.h) on the recorded H100 nights and on synthetic nights of several
// processes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "harness/errors.h"
#include "perf/compare.h"
#include "perf/stats.h"
#include "report_synthetic.h"

namespace dsv4h::report {
namespace {

using testing::draw_times;

const std::string kKernel = "BM_filtered_silu_mul/rows:3072/kept_permille:1000/manual_time";

Night night_of(const std::string& dir, int i, const std::map<std::string, std::vector<double>>& times) {
  return load_night(testing::write_night(dir, i, times));
}
Night night_of(const std::string& dir, int i, const testing::ProcessTimes& times) {
  return load_night(testing::write_night(dir, i, times));
}

// Runs dsv4h with `args`; returns its exit code and (in `output`) what it printed.
int run_dsv4h(const std::string& args, std::string& output) {
  const std::string log = testing::fresh_dir("cli_log") + "/out.txt";
  const int status = std::system((std::string(DSV4H_BIN) + " " + args + " >" + log + " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  output = text.str();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

using testing::draw_processes;

const std::string kRecordedBase = DSV4H_HISTORY_DIR "/2026-12-05-4def3bf.json";
const std::string kRecordedTwin = DSV4H_HISTORY_DIR "/2026-12-05-d977621.json";

TEST(ReportCompare, TenPercentRegressionIsSlower) {
  const std::string dir = testing::fresh_dir("regression");
  std::mt19937_64 rng(7);
  const std::string base = testing::write_night(dir, 0, {{kKernel, draw_processes(rng, 25.0, 0.005, 0.01)}});
  const std::string now = testing::write_night(dir, 1, {{kKernel, draw_processes(rng, 27.5, 0.005, 0.01)}});
  const Comparison c = compare_nights(load_night(base), load_night(now), {});
  ASSERT_EQ(c.benchmarks.size(), 1u);
  EXPECT_EQ(c.benchmarks[0].verdict, Verdict::slower);
  EXPECT_NEAR(c.benchmarks[0].change, 0.10, 0.02);
  EXPECT_EQ(c.benchmarks[0].processes_base, 3u);
  EXPECT_EQ(c.benchmarks[0].n_new, 30u);
  EXPECT_TRUE(c.any_slower());

  std::string output;
  EXPECT_EQ(run_dsv4h("report compare " + base + " " + now + " --json " + dir + "/cmp.json", output), 1) << output;
  EXPECT_NE(output.find("1 slower, 0 faster"), std::string::npos) << output;
  EXPECT_EQ(read_json_file(dir + "/cmp.json")["benchmarks"][0]["verdict"], "slower");
  // The same files the other way round: faster, exit 0.
  EXPECT_EQ(run_dsv4h("report compare " + now + " " + base, output), 0) << output;
  EXPECT_NE(output.find("faster"), std::string::npos) << output;
}

// The example: night 4def3bf with BM_mtp_expand/bs:1 (2.2 us) 20% slower, 0.44 us, which
// the former fixed 0.5 us floor passed; now flagged, and the only one. The floor, as an opt-in,
// still hides it.
TEST(ReportCompare, TwentyPercentOfADecodeSizeKernelIsSlower) {
  const std::string dir = testing::fresh_dir("decode");
  const std::string scaled = "BM_mtp_expand/bs:1/topk:4/fields:1/iterations:20/repeats:10/manual_time";
  nlohmann::json night = read_json_file(kRecordedBase);
  for (auto& entry : night["benchmarks"])
    if (entry.value("run_name", "") == scaled) entry["real_time"] = entry["real_time"].get<double>() * 1.2;
  write_json_file(dir + "/slower.json", night);
  const Comparison c = compare_nights(load_night(kRecordedBase), load_night(dir + "/slower.json"), {});
  ASSERT_EQ(c.count(Verdict::slower), 1u);
  EXPECT_EQ(c.benchmarks[0].name, scaled);
  EXPECT_NEAR(c.benchmarks[0].base_median_us, 2.2, 0.1);
  std::string output;
  EXPECT_EQ(run_dsv4h("report compare " + kRecordedBase + " " + dir + "/slower.json", output), 1) << output;
  EXPECT_EQ(run_dsv4h("report compare " + kRecordedBase + " " + dir + "/slower.json --min-change-us 0.5", output), 0)
      << output;
  EXPECT_EQ(run_dsv4h("report compare " + kRecordedBase + " " + dir + "/slower.json --min-change-us -1", output), 2)
      << output;
  EXPECT_NE(output.find("--min-change-us must be a number >= 0"), std::string::npos) << output;
}

// The recorded H100 nights of identical kernels, one process each: none flagged (at most 1 in
// 100 is the goal), though their medians moved by up to 8.1% and most repetition tests gave p < 0.05.
TEST(ReportCompare, RecordedNightsOfIdenticalKernelsAreNotFlagged) {
  const Comparison c = compare_nights(load_night(kRecordedBase), load_night(kRecordedTwin), {});
  ASSERT_EQ(c.benchmarks.size(), 173u);
  EXPECT_LE(100 * (c.count(Verdict::slower) + c.count(Verdict::faster)), c.benchmarks.size());
  std::string output;
  EXPECT_EQ(run_dsv4h("report compare " + kRecordedBase + " " + kRecordedTwin, output), 0) << output;
  EXPECT_NE(output.find("a night of one process has no spread between processes"), std::string::npos) << output;
}

// Synthetic nights of 3 processes built from the recorded ones: each benchmark at its recorded
// median, its processes apart by what it moved between the two recorded nights (|move| / sqrt 2,
// the spread of one process if the move is the difference of two), at least 0.2%, its repetitions
// by the spread of the recorded ones. 10 pairs of identical code, 1730 comparisons: at most 1 in
// 100 flagged.
TEST(ReportCompare, MultiProcessNightsOfIdenticalCodeFlagAtMostOneInHundred) {
  const Night base = load_night(kRecordedBase), twin = load_night(kRecordedTwin);
  const std::string dir = testing::fresh_dir("identical");
  size_t flagged = 0, compared = 0;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    std::mt19937_64 rng(seed);
    testing::ProcessTimes first, second;
    for (const auto& [name, samples] : base.benchmarks) {
      const double at = median(samples.times_us);
      const double move = std::fabs(median(twin.benchmarks.at(name).times_us) / at - 1);
      const double between = std::max(move / std::sqrt(2.0), 0.002), within = coefficient_of_variation(samples.times_us);
      first[name] = draw_processes(rng, at, between, within);
      second[name] = draw_processes(rng, at, between, within);
    }
    const Comparison c = compare_nights(night_of(dir, 0, first), night_of(dir, 1, second), {});
    flagged += c.count(Verdict::slower) + c.count(Verdict::faster);
    compared += c.benchmarks.size();
  }
  std::printf("identical code, 3 processes: %zu of %zu flagged\n", flagged, compared);
  EXPECT_LE(100 * flagged, compared);
}

// Goals: +10% of a kernel of 2 us or more, with the between-process spread typical of the
// recorded decode-size kernels (their median move, 1.4%, is that of two processes 1.5% apart),
// flagged in at least 95 of 100 seeded trials (98% in simulation: 3 processes a side leave a
// range of spread that now and then exceeds 6.7%), and +5% of one of 20 us or more (recorded
// moves below 0.3%) in all of them.
TEST(ReportCompare, SlowdownsOfTenPercentAtTwoMicrosecondsAndFiveAtTwentyAreFlagged) {
  const std::string dir = testing::fresh_dir("goals");
  struct Goal { double median_us, between_cv, slowdown; };
  for (const Goal g : {Goal{2.0, 0.015, 0.10}, Goal{5.0, 0.015, 0.10}, Goal{20.0, 0.003, 0.05}, Goal{400.0, 0.003, 0.05}}) {
    int flagged = 0;
    for (uint64_t seed = 1; seed <= 100; ++seed) {
      std::mt19937_64 rng(seed);
      const Night base = night_of(dir, 0, {{kKernel, draw_processes(rng, g.median_us, g.between_cv, 0.005)}});
      const Night now =
          night_of(dir, 1, {{kKernel, draw_processes(rng, g.median_us * (1 + g.slowdown), g.between_cv, 0.005)}});
      flagged += compare_nights(base, now, {}).any_slower();
    }
    EXPECT_GE(flagged, g.slowdown < 0.1 ? 100 : 95) << g.median_us << " us +" << 100 * g.slowdown << "%";
  }
}

// Same distribution in both nights (3 processes 1.5% apart), 200 seeded trials: at most 2 flagged.
TEST(ReportCompare, PureNoiseIsNotFlagged) {
  const std::string dir = testing::fresh_dir("noise");
  int flagged = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    std::mt19937_64 rng(seed);
    const Night base = night_of(dir, 0, {{kKernel, draw_processes(rng, 2.5, 0.015, 0.01)}});
    const Night now = night_of(dir, 1, {{kKernel, draw_processes(rng, 2.5, 0.015, 0.01)}});
    const Comparison c = compare_nights(base, now, {});
    flagged += c.count(Verdict::slower) + c.count(Verdict::faster);
  }
  EXPECT_LE(flagged, 2);
  std::printf("pure noise: %d of 200 trials flagged\n", flagged);
}

// Nothing compared, or too few repetitions for a verdict, is bad input (exit 2), never a pass.
TEST(ReportCompare, NothingJudgedExitsTwo) {
  const std::string dir = testing::fresh_dir("unjudged");
  std::mt19937_64 rng(17);
  const std::string a = testing::write_night(dir, 0, {{"BM_a", draw_times(rng, 3, 0.01)}});
  const std::string b = testing::write_night(dir, 1, {{"BM_b", draw_times(rng, 3, 0.01)}});
  const std::string two = testing::write_night(dir, 2, {{"BM_a", draw_times(rng, 3, 0.01, 2)}});
  std::string output;
  EXPECT_EQ(run_dsv4h("report compare " + a + " " + b, output), 2) << output;
  EXPECT_NE(output.find("no benchmark in common"), std::string::npos) << output;
  EXPECT_EQ(compare_nights(load_night(a), load_night(two), {}).benchmarks[0].verdict, Verdict::too_few);
  EXPECT_EQ(run_dsv4h("report compare " + a + " " + two, output), 2) << output;
  EXPECT_NE(output.find("too few repetitions for a verdict"), std::string::npos) << output;
}

TEST(ReportCompare, NoisyWhenSpreadIsLarge) {
  const std::string dir = testing::fresh_dir("noisy");
  std::mt19937_64 rng(3);
  const Night base = night_of(dir, 0, {{kKernel, draw_processes(rng, 25.0, 0.10, 0.01)}});
  const Night now = night_of(dir, 1, {{kKernel, draw_processes(rng, 25.0, 0.10, 0.01)}});
  EXPECT_EQ(compare_nights(base, now, {}).benchmarks[0].verdict, Verdict::noisy);
}

TEST(ReportCompare, BenchmarksInOneFileOnlyAreListed) {
  const std::string dir = testing::fresh_dir("only");
  std::mt19937_64 rng(5);
  const Night base = night_of(dir, 0, {{kKernel, draw_times(rng, 25, 0.01)}, {"BM_old", draw_times(rng, 3, 0.01)}});
  const Night now = night_of(dir, 1, {{kKernel, draw_times(rng, 25, 0.01)}, {"BM_new", draw_times(rng, 3, 0.01)}});
  const Comparison c = compare_nights(base, now, {});
  ASSERT_EQ(c.benchmarks.size(), 1u);
  EXPECT_EQ(c.benchmarks[0].verdict, Verdict::unchanged);
  EXPECT_EQ(c.only_in_base, std::vector<std::string>{"BM_old"});
  EXPECT_EQ(c.only_in_new, std::vector<std::string>{"BM_new"});
}

TEST(ReportCompare, RegressionsComeFirst) {
  const std::string dir = testing::fresh_dir("order");
  std::mt19937_64 rng(9);
  const Night base = night_of(dir, 0, {{"BM_a", draw_times(rng, 100, 0.01)}, {"BM_b", draw_times(rng, 100, 0.01)},
                                       {"BM_c", draw_times(rng, 100, 0.01)}});
  const Night now = night_of(dir, 1, {{"BM_a", draw_times(rng, 80, 0.01)}, {"BM_b", draw_times(rng, 115, 0.01)},
                                      {"BM_c", draw_times(rng, 130, 0.01)}});
  const Comparison c = compare_nights(base, now, {});
  ASSERT_EQ(c.benchmarks.size(), 3u);
  EXPECT_EQ(c.benchmarks[0].name, "BM_c");  // +30% before +15%
  EXPECT_EQ(c.benchmarks[1].name, "BM_b");
  EXPECT_EQ(c.benchmarks[2].verdict, Verdict::faster);
}

// A night timed on the device is not compared with one timed at the host's launch rate: exit 2,
// naming the field; two nights timed alike are.
TEST(ReportCompare, NightsTimedDifferentlyAreNotCompared) {
  const std::string dir = testing::fresh_dir("timing");
  std::mt19937_64 rng(13);
  const std::string host = testing::write_night(dir, 0, {{kKernel, draw_times(rng, 3.5, 0.01)}});
  const std::string device = testing::write_night(dir, 1, {{kKernel, draw_times(rng, 1.4, 0.01)}}, "device");
  const std::string device_again = testing::write_night(dir, 2, {{kKernel, draw_times(rng, 1.4, 0.01)}}, "device");
  EXPECT_THROW(compare_nights(load_night(host), load_night(device), {}), BadInput);
  std::string output;
  EXPECT_EQ(run_dsv4h("report compare " + host + " " + device, output), 2) << output;
  EXPECT_NE(output.find("field \"context.timing\""), std::string::npos) << output;
  EXPECT_NE(output.find("absent (launches timed at the host's rate)"), std::string::npos) << output;
  EXPECT_EQ(run_dsv4h("report compare " + device + " " + device_again, output), 0) << output;
}

// Nights on different cards are not compared (exit 2, naming the field); a file that names no
// device (none does in a bare Google Benchmark file) is compared with either.
TEST(ReportCompare, NightsOnDifferentCardsAreNotCompared) {
  const std::string dir = testing::fresh_dir("device");
  std::mt19937_64 rng(23);
  const std::string h200 = testing::write_night(dir, 0, {{kKernel, draw_times(rng, 1.4, 0.01)}}, "device", "NVIDIA H200");
  const std::string h100 =
      testing::write_night(dir, 1, {{kKernel, draw_times(rng, 1.2, 0.01)}}, "device", "NVIDIA H100 80GB HBM3");
  EXPECT_THROW(compare_nights(load_night(h200), load_night(h100), {}), BadInput);
  std::string output;
  EXPECT_EQ(run_dsv4h("report compare " + h200 + " " + h100, output), 2) << output;
  EXPECT_NE(output.find("field \"device.name\" is \"NVIDIA H100 80GB HBM3\", in " + h200 + " \"NVIDIA H200\""),
            std::string::npos)
      << output;
  nlohmann::json unnamed = read_json_file(h100);
  unnamed.erase("device");
  write_json_file(dir + "/unnamed.json", unnamed);
  EXPECT_EQ(run_dsv4h("report compare " + h200 + " " + dir + "/unnamed.json", output), 0) << output;
}

// Malformed files exit 2 with a message naming the file and the field.
TEST(ReportCompare, MalformedFilesExitTwoNamingTheField) {
  const std::string dir = testing::fresh_dir("malformed");
  std::mt19937_64 rng(11);
  const std::string good = testing::write_night(dir, 0, {{kKernel, draw_times(rng, 25, 0.01)}});
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"context", nlohmann::json::object()}}, "field \"benchmarks\""},
      {{{"benchmarks", {{{"name", "BM_x"}, {"run_type", "iteration"}, {"time_unit", "us"}}}}},
       "field \"benchmarks[0].real_time\""},
      {{{"benchmarks", {{{"name", "BM_x"}, {"run_type", "iteration"}, {"real_time", 1.0}, {"time_unit", "hours"}}}}},
       "field \"benchmarks[0].time_unit\""},
      {{{"benchmarks", {{{"name", "BM_x"}, {"real_time", 1.0}, {"time_unit", "us"}}}}, {"ceilings", {{"copy_GBps", "fast"}}}},
       "field \"ceilings.copy_GBps\""},
      {{{"benchmarks", {{{"name", "BM_x"}, {"real_time", 1.7e308}, {"time_unit", "ns"}}}}},
       "field \"benchmarks[0].real_time\" must be a positive time of at most an hour"},
      {{{"benchmarks", {{{"name", "BM_x"}, {"real_time", 1.0}, {"time_unit", "us"}, {"process", -1}}}}},
       "field \"benchmarks[0].process\" must be an integer from 0 to 1000000"},
      {{{"benchmarks", {{{"name", "BM_x"}, {"real_time", 1.0}, {"time_unit", "us"}, {"repetition_index", 0}},
                        {{"name", "BM_x"}, {"real_time", 1.0}, {"time_unit", "us"}, {"repetition_index", 0}}}}},
       "field \"benchmarks[1].name\": benchmark \"BM_x\" listed twice"},
  };
  std::string output;
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string bad = dir + "/bad" + std::to_string(i) + ".json";
    write_json_file(bad, cases[i].first);
    EXPECT_EQ(run_dsv4h("report compare " + good + " " + bad, output), 2) << output;
    EXPECT_NE(output.find(bad), std::string::npos) << output;
    EXPECT_NE(output.find(cases[i].second), std::string::npos) << "expected " << cases[i].second << " in " << output;
  }
  std::ofstream(dir + "/broken.json") << "{\"benchmarks\": [";
  EXPECT_EQ(run_dsv4h("report compare " + good + " " + dir + "/broken.json", output), 2) << output;
  EXPECT_NE(output.find("broken.json: not valid JSON"), std::string::npos) << output;
  EXPECT_EQ(run_dsv4h("report compare " + good, output), 2) << output;
  EXPECT_EQ(run_dsv4h("report compare " + good + " " + good + " --threshold 5", output), 2) << output;
  EXPECT_NE(output.find("--threshold must be a number in (0, 1)"), std::string::npos) << output;
}

}  // namespace
}  // namespace dsv4h::report
