// Nightly benchmark history: one JSON file per night under reports/history/, named
// `<date>-<shortcommit>.json` (reports/history/README.md). A file is Google Benchmark's JSON as
// written by `--benchmark_out` with `--benchmark_repetitions=N`, plus top-level fields added by
// ci/history-record:
//   "context":    Google Benchmark's context (kept as written); only "context.timing" is read: how
//                 the benchmarks were timed ("device": launches queued behind a stream hold; absent
//                 in nights of binaries before f4e39e2 (2026-12-02), timed at the host's rate or,
//                 from 9c6b223, on the device without saying so)
//   "benchmarks": every entry; those with "run_type": "iteration" are the repetitions read here
//                 ("name" or "run_name", "real_time", "time_unit" ns|us|ms|s, user counters
//                 "bytes", "flops", "copy_ceiling_GBps", and "process": which of the night's
//                 processes of the binary ran it, added by ci/history-record; absent in nights
//                 before it: one process, 0); "aggregate" entries are ignored because every
//                 statistic is recomputed from the repetitions
//   "commit":     the commit benchmarked (string)
//   "date":       the night, YYYY-MM-DD (string; sorts the history)
//   "device":     {"name", "driver", "clocks": {nvidia-smi column: value}}
//   "ceilings":   {"copy_GBps": device-to-device copy bandwidth measured by the benchmark,
//                  "bf16_matmul_TFLOPs": torch bf16 matrix product, or null}
//   "accuracy":   optional, [{"case", "budget_used"}] from `dsv4h verify --json` (the largest
//                 fraction of its tolerance a case used; "inf" where it failed outright)
// A bare Google Benchmark file (no top-level fields) is read too, for `dsv4h report compare`;
// a history directory requires "commit" and "date". Every malformed field is a BadInput naming
// the file and the field: among them a time that is not positive or exceeds an hour (1.7e308 is
// no measurement, and overflows every sum), a date that is no day of the calendar, a repetition
// listed twice (the same benchmark, process and repetition_index: a binary's output merged twice),
// and, in a history directory, two files of the same commit and date.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace dsv4h::report {

// The repetitions of one benchmark in one night.
struct BenchmarkSamples {
  std::vector<double> times_us;              // real_time of each repetition
  std::vector<int> processes;                // the process of each repetition (0 in one-process nights)
  std::vector<double> fraction_of_ceiling;   // (bytes / time) / copy ceiling, per repetition; empty without bytes
};

// The median of each process's repetitions, by process index.
std::vector<double> process_medians(const BenchmarkSamples& samples);

struct AccuracyEntry {
  std::string test_case;
  double budget_used;  // infinity where the case failed outright
};

struct Night {
  std::string path;
  std::string commit, date;                  // empty in a bare Google Benchmark file
  std::string device_name, device_driver;
  std::string timing;                        // context.timing; empty: launches timed at the host's rate
  std::map<std::string, std::string> device_clocks;
  std::optional<double> copy_ceiling_GBps, bf16_matmul_TFLOPs;
  std::vector<AccuracyEntry> accuracy;
  std::map<std::string, BenchmarkSamples> benchmarks;  // by benchmark name

  // "abc1234 (2026-11-03)", or the file name where the file has no commit.
  std::string label() const;
};

Night load_night(const std::string& path);

// Every *.json in `dir` (README.md and other files are skipped), oldest first (by date, then
// file name); each must carry "commit" and "date". BadInput when there are none.
std::vector<Night> load_history(const std::string& dir);

}  // namespace dsv4h::report
