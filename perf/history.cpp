#include "history.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <set>
#include <tuple>

#include "harness/errors.h"
#include "harness/json_file.h"
#include "stats.h"

namespace dsv4h::report {

namespace {

using nlohmann::json;

// Microseconds per time_unit; Google Benchmark writes one of these four.
double us_per_unit(const std::string& path, const std::string& field, const std::string& unit) {
  if (unit == "ns") return 1e-3;
  if (unit == "us") return 1.0;
  if (unit == "ms") return 1e3;
  if (unit == "s") return 1e6;
  throw BadInput(path + ": field \"" + field + "\" must be ns, us, ms or s, got \"" + unit + "\"");
}

const json& field_of(const std::string& path, const json& object, const std::string& where, const std::string& key,
                     bool (json::*is_type)() const noexcept, const char* type) {
  if (!object.contains(key) || !(object[key].*is_type)())
    throw BadInput(path + ": field \"" + where + key + "\" must be " + type);
  return object[key];
}

std::string optional_string(const std::string& path, const json& object, const std::string& where, const std::string& key) {
  if (!object.contains(key) || object[key].is_null()) return "";
  return field_of(path, object, where, key, &json::is_string, "a string").get<std::string>();
}

std::optional<double> optional_positive(const std::string& path, const json& object, const std::string& where,
                                        const std::string& key) {
  if (!object.contains(key) || object[key].is_null()) return std::nullopt;
  const double v = field_of(path, object, where, key, &json::is_number, "a number").get<double>();
  if (!(v > 0)) throw BadInput(path + ": field \"" + where + key + "\" must be > 0");
  return v;
}

void read_device(const std::string& path, const json& doc, Night& night) {
  if (!doc.contains("device")) return;
  const json& device = field_of(path, doc, "", "device", &json::is_object, "an object");
  night.device_name = optional_string(path, device, "device.", "name");
  night.device_driver = optional_string(path, device, "device.", "driver");
  if (!device.contains("clocks")) return;
  for (const auto& [name, value] : field_of(path, device, "device.", "clocks", &json::is_object, "an object").items())
    night.device_clocks[name] = value.is_string() ? value.get<std::string>() : value.dump();
}

void read_accuracy(const std::string& path, const json& doc, Night& night) {
  if (!doc.contains("accuracy")) return;
  const json& list = field_of(path, doc, "", "accuracy", &json::is_array, "a list of {case, budget_used}");
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string where = "accuracy[" + std::to_string(i) + "].";
    if (!list[i].is_object()) throw BadInput(path + ": field \"accuracy[" + std::to_string(i) + "]\" must be an object");
    AccuracyEntry e;
    e.test_case = field_of(path, list[i], where, "case", &json::is_string, "a string").get<std::string>();
    const json& used = list[i].contains("budget_used") ? list[i]["budget_used"] : json();
    if (used.is_number() && used.get<double>() >= 0) e.budget_used = used.get<double>();
    else if (used == "inf") e.budget_used = std::numeric_limits<double>::infinity();
    else throw BadInput(path + ": field \"" + where + "budget_used\" must be a number >= 0 or \"inf\"");
    night.accuracy.push_back(e);
  }
}

// (benchmark, process, repetition_index or -1) of every repetition read so far.
using RepetitionKeys = std::set<std::tuple<std::string, int, long long>>;

int optional_index(const std::string& path, const json& entry, const std::string& where, const std::string& key) {
  if (!entry.contains(key)) return -1;
  if (!entry[key].is_number_integer() || entry[key].get<long long>() < 0 || entry[key].get<long long>() > 1000000)
    throw BadInput(path + ": field \"" + where + key + "\" must be an integer from 0 to 1000000");
  return static_cast<int>(entry[key].get<long long>());
}

void read_repetition(const std::string& path, const json& entry, size_t index, Night& night, RepetitionKeys& seen) {
  const std::string where = "benchmarks[" + std::to_string(index) + "].";
  const std::string name =
      field_of(path, entry, where, entry.contains("run_name") ? "run_name" : "name", &json::is_string, "a string")
          .get<std::string>();
  if (name.empty()) throw BadInput(path + ": field \"" + where + "name\" must not be empty");
  const double real_time = field_of(path, entry, where, "real_time", &json::is_number, "a number").get<double>();
  const std::string unit = field_of(path, entry, where, "time_unit", &json::is_string, "a string").get<std::string>();
  const double time_us = real_time * us_per_unit(path, where + "time_unit", unit);
  // An hour is far beyond any kernel benchmarked here, and far below where sums of times overflow.
  if (!(time_us > 0) || !(time_us <= 3.6e9))
    throw BadInput(path + ": field \"" + where + "real_time\" must be a positive time of at most an hour");
  const int process = std::max(0, optional_index(path, entry, where, "process"));
  const int repetition = optional_index(path, entry, where, "repetition_index");
  if (!seen.emplace(name, process, repetition).second)
    throw BadInput(path + ": field \"" + where + "name\": benchmark \"" + name + "\" listed twice (process " +
                   std::to_string(process) + ", repetition_index " + std::to_string(repetition) + ")");
  BenchmarkSamples& samples = night.benchmarks[name];
  samples.times_us.push_back(time_us);
  samples.processes.push_back(process);

  // A benchmark that moves no bytes (the empty kernel) has no fraction of the copy ceiling.
  const bool moves_bytes = !(entry.contains("bytes") && entry["bytes"].is_number() && entry["bytes"] == 0);
  const std::optional<double> bytes = moves_bytes ? optional_positive(path, entry, where, "bytes") : std::nullopt;
  // The night's ceiling, where it has one, takes precedence; the entry's is checked all the same.
  const std::optional<double> entry_ceiling = optional_positive(path, entry, where, "copy_ceiling_GBps");
  const std::optional<double> ceiling = night.copy_ceiling_GBps ? night.copy_ceiling_GBps : entry_ceiling;
  if (bytes && ceiling) samples.fraction_of_ceiling.push_back(*bytes / time_us * 1e-3 / *ceiling);
}

bool is_iso_date(const std::string& s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9})
    if (!std::isdigit(static_cast<unsigned char>(s[i]))) return false;
  const int year = std::stoi(s.substr(0, 4)), month = std::stoi(s.substr(5, 2)), day = std::stoi(s.substr(8, 2));
  if (month < 1 || month > 12) return false;
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  const int days[] = {31, leap ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  return day >= 1 && day <= days[month - 1];
}

}  // namespace

std::vector<double> process_medians(const BenchmarkSamples& samples) {
  std::map<int, std::vector<double>> by_process;
  for (size_t i = 0; i < samples.times_us.size(); ++i) by_process[samples.processes[i]].push_back(samples.times_us[i]);
  std::vector<double> medians;
  for (const auto& [process, times] : by_process) medians.push_back(median(times));
  return medians;
}

std::string Night::label() const {
  if (commit.empty()) return path.substr(path.find_last_of('/') + 1);
  return commit.substr(0, 12) + (date.empty() ? "" : " (" + date + ")");
}

Night load_night(const std::string& path) {
  const json doc = read_json_file(path);
  if (!doc.is_object()) throw BadInput(path + ": expected a JSON object (Google Benchmark output)");
  Night night;
  night.path = path;
  night.commit = optional_string(path, doc, "", "commit");
  night.date = optional_string(path, doc, "", "date");
  // Nights are ordered by their dates as strings: only YYYY-MM-DD orders as time does.
  if (!night.date.empty() && !is_iso_date(night.date))
    throw BadInput(path + ": field \"date\" must be a day YYYY-MM-DD, got \"" + night.date + "\"");
  read_device(path, doc, night);
  if (doc.contains("context")) {
    const json& context = field_of(path, doc, "", "context", &json::is_object, "an object");
    night.timing = optional_string(path, context, "context.", "timing");
  }
  if (doc.contains("ceilings")) {
    const json& ceilings = field_of(path, doc, "", "ceilings", &json::is_object, "an object");
    night.copy_ceiling_GBps = optional_positive(path, ceilings, "ceilings.", "copy_GBps");
    night.bf16_matmul_TFLOPs = optional_positive(path, ceilings, "ceilings.", "bf16_matmul_TFLOPs");
  }
  read_accuracy(path, doc, night);
  const json& entries = field_of(path, doc, "", "benchmarks", &json::is_array, "a list (Google Benchmark output)");
  RepetitionKeys seen;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (!entries[i].is_object()) throw BadInput(path + ": field \"benchmarks[" + std::to_string(i) + "]\" must be an object");
    // An entry without run_type comes from a run without repetitions: it is the one sample.
    const std::string where = "benchmarks[" + std::to_string(i) + "].";
    const std::string run_type = optional_string(path, entries[i], where, "run_type");
    if (run_type.empty() || run_type == "iteration") read_repetition(path, entries[i], i, night, seen);
  }
  if (night.benchmarks.empty()) throw BadInput(path + ": field \"benchmarks\" holds no repetition (run_type \"iteration\")");
  return night;
}

std::vector<Night> load_history(const std::string& dir) {
  std::vector<Night> nights;
  for (const std::string& path : json_files_in(dir)) {
    Night night = load_night(path);
    if (night.commit.empty()) throw BadInput(path + ": field \"commit\" must be a string (a history file)");
    if (night.date.empty()) throw BadInput(path + ": field \"date\" must be a string (a history file)");
    nights.push_back(std::move(night));
  }
  if (nights.empty()) throw BadInput(dir + ": no history files (*.json)");
  // The same night recorded twice would count twice in every trend and could be its own baseline.
  for (size_t i = 0; i < nights.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (nights[i].commit == nights[j].commit && nights[i].date == nights[j].date)
        throw BadInput(nights[i].path + ": field \"commit\" and \"date\" are those of " + nights[j].path +
                       ": one night recorded twice");
  std::stable_sort(nights.begin(), nights.end(),
                   [](const Night& a, const Night& b) { return a.date != b.date ? a.date < b.date : a.path < b.path; });
  return nights;
}

}  // namespace dsv4h::report
