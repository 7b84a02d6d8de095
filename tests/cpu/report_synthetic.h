// Synthetic benchmark histories for the report tests: nights of Google Benchmark repetitions
// written in the history format (reports/history/README.md), drawn from a seeded generator.
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "harness/json_file.h"

namespace dsv4h::report::testing {

// `repetitions` times around `median_us` with coefficient of variation `cv` (normal noise).
inline std::vector<double> draw_times(std::mt19937_64& rng, double median_us, double cv, int repetitions = 10) {
  std::normal_distribution<double> noise(0.0, cv);
  std::vector<double> times;
  for (int i = 0; i < repetitions; ++i) times.push_back(median_us * (1 + noise(rng)));
  return times;
}

// `processes` processes of a benchmark binary, each of `repetitions` times: the process's own
// median is `median_us` moved by normal noise of `between_cv`, its repetitions around that by
// `within_cv` (the nights of ci/nightly, whose processes differ more than their repetitions).
inline std::vector<std::vector<double>> draw_processes(std::mt19937_64& rng, double median_us, double between_cv,
                                                       double within_cv, int processes = 3, int repetitions = 10) {
  std::normal_distribution<double> noise(0.0, between_cv);
  std::vector<std::vector<double>> times;
  for (int p = 0; p < processes; ++p) times.push_back(draw_times(rng, median_us * (1 + noise(rng)), within_cv, repetitions));
  return times;
}

using ProcessTimes = std::map<std::string, std::vector<std::vector<double>>>;

// One night: every benchmark's repetitions, per process (a "process" field where there are
// several, as ci/history-record writes them), plus the aggregates Google Benchmark adds, which
// the reader must ignore, and bytes and the copy ceiling for the fraction of ceiling.
inline nlohmann::json night_document(const std::string& commit, const std::string& date, const ProcessTimes& times_us) {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& [name, processes] : times_us) {
    for (size_t p = 0; p < processes.size(); ++p) {
      const std::vector<double>& times = processes[p];
      for (size_t i = 0; i < times.size(); ++i) {
        entries.push_back({{"name", name}, {"run_name", name}, {"run_type", "iteration"}, {"repetition_index", i},
                           {"repetitions", times.size()}, {"iterations", 20}, {"real_time", times[i] * 1e3},
                           {"cpu_time", 1.0}, {"time_unit", "ns"}, {"bytes", 1e6}, {"flops", 5e5},
                           {"copy_ceiling_GBps", 4000.0}});
        if (processes.size() > 1) entries.back()["process"] = p;
      }
    }
    entries.push_back({{"name", name + "_median"}, {"run_name", name}, {"run_type", "aggregate"},
                       {"aggregate_name", "median"}, {"real_time", 1e9}, {"time_unit", "ns"}});
  }
  return {{"context", {{"date", date}}}, {"benchmarks", entries}, {"commit", commit}, {"date", date},
          {"device", {{"name", "Synthetic GPU"}, {"driver", "0"}, {"clocks", {{"clocks.max.sm [MHz]", "1980 MHz"}}}}},
          {"ceilings", {{"copy_GBps", 4000.0}, {"bf16_matmul_TFLOPs", nullptr}}}};
}

// A night of one process.
inline nlohmann::json night_document(const std::string& commit, const std::string& date,
                                     const std::map<std::string, std::vector<double>>& times_us) {
  ProcessTimes one_process;
  for (const auto& [name, times] : times_us) one_process[name] = {times};
  return night_document(commit, date, one_process);
}

// The temporary files of this test process, under one directory removed at exit; the process id
// keeps concurrent runs (the cpu and asan builds) apart.
struct TemporaryRoot {
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("dsv4h_report_test_" + std::to_string(::getpid()));
  ~TemporaryRoot() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};
inline const TemporaryRoot temporary_root;

// A fresh, empty directory under the temporary root.
inline std::string fresh_dir(const std::string& name) {
  const std::filesystem::path dir = temporary_root.path / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

// Night i of a history: date 2026-10-01 + i, commit "c<i>...", file `<date>-<commit>.json`.
inline std::string night_commit(int i) { return "c" + std::to_string(100 + i) + "abcd"; }
inline std::string night_date(int i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "2026-%02d-%02d", 10 + i / 28, 1 + i % 28);
  return buf;
}
// `timing` is the night's context.timing ("" leaves it out, as nights before the stream hold did);
// `card`, where given, replaces night_document's device.name ("": a night naming no card).
inline std::string write_night(const std::string& dir, int i, const ProcessTimes& times, const std::string& timing = "",
                               const std::optional<std::string>& card = std::nullopt) {
  const std::string path = dir + "/" + night_date(i) + "-" + night_commit(i) + ".json";
  nlohmann::json night = night_document(night_commit(i), night_date(i), times);
  if (!timing.empty()) night["context"]["timing"] = timing;
  if (card) night["device"]["name"] = *card;
  write_json_file(path, night);
  return path;
}
inline std::string write_night(const std::string& dir, int i, const std::map<std::string, std::vector<double>>& times,
                               const std::string& timing = "", const std::optional<std::string>& card = std::nullopt) {
  ProcessTimes one_process;
  for (const auto& [name, repetitions] : times) one_process[name] = {repetitions};
  return write_night(dir, i, one_process, timing, card);
}

}  // namespace dsv4h::report::testing
