#include "status.h"

#include <algorithm>
#include <map>
#include <optional>
#include <regex>

#include "harness/errors.h"
#include "harness/json_file.h"

namespace dsv4h::report {

namespace {

using nlohmann::json;

std::string text_of(const json& j, const char* key) {
  return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : "";
}

const json& array_of(const json& record, const char* key) {
  static const json empty = json::array();
  return record.contains(key) && record[key].is_array() ? record[key] : empty;
}

// The component a verify case is of: its name before "(", past a relation's "relation(...):".
std::string case_component(const std::string& test_case) {
  static const std::regex relation(R"(^[A-Za-z_]+\([^)]*\):)");
  const std::string plain = std::regex_replace(test_case, relation, "", std::regex_constants::format_first_only);
  return plain.substr(0, plain.find('('));
}

// The record's card: some schema 1 records name it as dsv4h verify does, "NVIDIA H200 (nvidia,
// device 0)", the same card as nvidia-smi's "NVIDIA H200".
std::string card_of(const json& record) {
  static const std::regex backend_suffix(R"( \([^()]*, device \d+\)$)");
  return std::regex_replace(text_of(record, "device"), backend_suffix, "");
}

// A recorded failure with what the record keeps of it: its message (first lines) and reproduction.
std::string with_details(std::string line, const json& entry) {
  std::string message = text_of(entry, "message");
  if (message.size() > 300) message = message.substr(0, 300) + "...";
  if (!message.empty()) line += ": " + message;
  const std::string reproduce = text_of(entry, "reproduce");
  if (!reproduce.empty()) line += "\n    reproduce: " + reproduce;
  return line;
}

struct Record {
  std::string file;
  json doc;
};

StatusVerdict verdict_from(const Record& r) {
  StatusVerdict v;
  v.found = true;
  v.record = r.file;
  v.commit = text_of(r.doc, "commit");
  v.card = card_of(r.doc);
  v.date = text_of(r.doc, "date");
  return v;
}

// Each verdict of a record, or one with found == false where the record holds none of it.
StatusVerdict tests_of(const Record& r, const std::string& component) {
  int passed = 0, failed = 0, skipped = 0, verify_passed = 0, verify_failed = 0;
  std::vector<std::string> failures;
  for (const json& t : array_of(r.doc, "tests")) {
    if (text_of(t, "component") != component) continue;
    const std::string status = text_of(t, "status");
    (status == "pass" ? passed : status == "skip" ? skipped : failed)++;
    if (status == "fail") failures.push_back(with_details("test " + text_of(t, "name"), t));
  }
  const json verify = r.doc.contains("verify") ? r.doc["verify"] : json::object();
  for (const json& c : array_of(verify, "cases")) {
    if (case_component(text_of(c, "case")) != component) continue;
    const bool pass = text_of(c, "status") == "pass";
    (pass ? verify_passed : verify_failed)++;
    if (!pass) failures.push_back(with_details("verify " + text_of(c, "case") + " (" + text_of(c, "status") + ")", c));
  }
  if (passed + failed + skipped + verify_passed + verify_failed == 0) return {};
  StatusVerdict v = verdict_from(r);
  v.ok = failures.empty();
  v.summary = std::to_string(passed) + " passed, " + std::to_string(failed) + " failed, " + std::to_string(skipped) +
              " skipped; verify " + std::to_string(verify_passed) + " passed, " + std::to_string(verify_failed) + " failed";
  v.failures = failures;
  return v;
}

// gtest's wildcard match: '*' any run of characters, '?' one.
bool glob_matches(const std::string& pattern, const std::string& name) {
  size_t p = 0, n = 0, star = std::string::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p, ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++, resume = n;
    } else if (star != std::string::npos) {
      p = star + 1, n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<std::string> split_patterns(const std::string& list) {
  std::vector<std::string> out;
  for (size_t begin = 0; begin <= list.size();) {
    const size_t end = std::min(list.find(':', begin), list.size());
    if (end > begin) out.push_back(list.substr(begin, end - begin));
    begin = end + 1;
  }
  return out;
}

// Whether a --gtest_filter ("POSITIVE[-NEGATIVE]", each ':'-separated patterns) selects `name`.
bool filter_selects(const std::string& filter, const std::string& name) {
  const size_t dash = filter.find('-');
  std::vector<std::string> positive = split_patterns(filter.substr(0, dash));
  if (positive.empty()) positive.push_back("*");
  const auto any = [&](const std::vector<std::string>& patterns) {
    return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) { return glob_matches(p, name); });
  };
  return any(positive) && !(dash != std::string::npos && any(split_patterns(filter.substr(dash + 1))));
}

// The component whose GPU test filter selects `test` by its most specific pattern (the longest:
// moe's "*moe*" also selects moe_routing's tests, which "*moe_routing*" claims), as
// ci/dsv4h_components.component_of_test attributes a run's tests; "" where none does.
std::string owner_of(const std::string& test, const std::vector<StatusComponent>& components) {
  std::string owner;
  size_t best = 0;
  for (const StatusComponent& c : components)
    for (const std::string& p : split_patterns(c.gpu_tests.substr(0, c.gpu_tests.find('-'))))
      if (p.size() > best && glob_matches(p, test)) owner = c.name, best = p.size();
  return owner;
}

// A mutant is caught where its record says so: "caught" (schema 1 from 2026-12-02 on, and 2) or the
// first records' "verdict"; a race mutant where any of its perturbed runs caught it. Each phase holds
// verdicts only where the record ran it: a tests and perturb run holds its race mutants' verdicts,
// and none of the other mutants (as it would read, had its mutants array been taken as complete).
struct MutantVerdict {
  bool caught = false;
  std::string how;     // the record's word for it where not caught
  StatusVerdict from;  // the record it came from
};

// The noop mutant (every kernel a no-op) as component c's verdict: no test of c may pass with it.
// Its run's tests (ci/check-mutant's failed_tests and passed_tests, from 2026-12-06) that are c's
// (by the record's tests, else by the components' test filters: owner_of) decide: none, and the
// run is not c's; one passed, survived; all failed, caught where the run found a mismatch at all
// (caught, or a test passed: check-mutant requires both), else survived ("tests failed, but none
// on a mismatch"). A run without test lists ran every component's tests.
std::optional<MutantVerdict> noop_of(const json& m, const Record& r, const StatusComponent& c,
                                     const std::vector<StatusComponent>& components) {
  const bool caught = m.contains("caught") && m["caught"].is_boolean() && m["caught"].get<bool>();
  MutantVerdict v;
  v.from = verdict_from(r);
  v.how = text_of(m, "status");
  if (!m.contains("failed_tests") && !m.contains("passed_tests")) {
    v.caught = caught;
    return v;
  }
  const auto mine = [&](const std::string& name) {
    for (const json& t : array_of(r.doc, "tests"))
      if (text_of(t, "name") == name) return text_of(t, "component") == c.name;
    return owner_of(name, components) == c.name;
  };
  const auto any_mine = [&](const char* key) {
    const json& names = array_of(m, key);
    return std::any_of(names.begin(), names.end(), [&](const json& n) { return n.is_string() && mine(n.get<std::string>()); });
  };
  const bool passed = any_mine("passed_tests");
  if (!passed && !any_mine("failed_tests")) return std::nullopt;
  v.caught = !passed && (caught || !array_of(m, "passed_tests").empty());
  if (passed) v.how = "a test of its passed with every kernel a no-op";
  return v;
}

std::map<std::string, MutantVerdict> mutants_of(const Record& r, const StatusComponent& component,
                                                const std::vector<StatusComponent>& components) {
  std::map<std::string, MutantVerdict> verdicts;
  const auto ran = [&](const char* phase) {
    if (!r.doc.contains("phases") || !r.doc["phases"].is_array()) return true;  // before phases were recorded
    const json& phases = r.doc["phases"];
    return std::find(phases.begin(), phases.end(), json(phase)) != phases.end();
  };
  const auto declared = [&](const std::string& name) {
    return std::find(component.mutants.begin(), component.mutants.end(), name) != component.mutants.end();
  };
  for (const json& m : array_of(r.doc, "mutants")) {
    const std::string name = text_of(m, "mutant");
    if (name == "noop" && ran("mutants")) {
      if (std::optional<MutantVerdict> noop = noop_of(m, r, component, components)) verdicts[name] = std::move(*noop);
      continue;
    }
    if (!ran("mutants") || !declared(name)) continue;
    MutantVerdict& v = verdicts[name];
    v.from = verdict_from(r);
    v.caught = m.contains("caught") && m["caught"].is_boolean() ? m["caught"].get<bool>() : text_of(m, "verdict") == "caught";
    v.how = text_of(m, "status").empty() ? text_of(m, "verdict") : text_of(m, "status");
  }
  for (const json& p : array_of(r.doc, "perturb")) {
    const std::string name = text_of(p, "mutant");
    if (!ran("perturb") || text_of(p, "check") != "perturbed" || !declared(name)) continue;
    MutantVerdict& v = verdicts[name];
    v.from = verdict_from(r);
    v.caught = v.caught || (p.contains("caught") && p["caught"] == true);
    v.how = v.caught ? "caught perturbed" : "caught in no perturbed run";
  }
  return verdicts;
}

// Each mutant's latest verdict, joined: the verdict names the oldest record it draws on (whose
// commit the kernels are compared with), and the summary says when several records hold them (a
// race mutant is judged in the perturb phase, which a run may leave out). noop, no mutant of the
// descriptor's, is counted apart: named after the count where a run covered the component.
StatusVerdict joined_mutants(const std::map<std::string, MutantVerdict>& latest, const StatusComponent& component) {
  if (latest.empty()) return {};
  const MutantVerdict* oldest = &latest.begin()->second;
  std::map<std::string, std::vector<std::string>> by_record;
  for (const auto& [name, m] : latest) {
    if (m.from.date < oldest->from.date) oldest = &m;
    by_record[m.from.record].push_back(name);
  }
  StatusVerdict v = oldest->from;
  int caught = 0;
  for (const auto& [name, m] : latest) {
    caught += m.caught && name != "noop";
    if (!m.caught) v.failures.push_back(name + ": " + (m.how.empty() ? "survived" : m.how));
  }
  const bool none_survived = v.failures.empty();
  for (const std::string& name : component.mutants)
    if (!latest.count(name)) v.failures.push_back(name + ": in no record");
  v.ok = v.failures.empty();
  v.incomplete = !v.ok && none_survived;
  v.summary = "caught " + std::to_string(caught) + "/" + std::to_string(component.mutants.size());
  if (latest.count("noop")) v.summary += latest.at("noop").caught ? ", noop caught" : ", noop SURVIVED";
  if (by_record.size() > 1) {
    v.summary += " (each mutant's latest run:";
    for (const auto& [record, names] : by_record) {
      v.summary += " " + record + " ";
      for (size_t i = 0; i < names.size(); ++i) v.summary += (i ? "," : "") + names[i];
      v.summary += ";";
    }
    v.summary.back() = ')';
  }
  return v;
}

// Whether a sanitizer run ran any of component c's tests. One without a filter (schema 1) ran its
// binary whole. Otherwise the record's own tests of that binary that the filter selects say it,
// where it selects any; else c's test patterns stand for its tests' names (a pattern like
// "*sparse_attention*" is selected by a filter that would select its tests): a record merged from
// several runs may hold the tests of other components than its sanitizer runs' (2026-12-07: mhc's
// tests, and sanitizer runs of mhc's and of the model's).
bool run_covers(const json& run, const Record& r, const StatusComponent& c) {
  const std::string filter = text_of(run, "filter"), binary = text_of(run, "binary");
  if (filter.empty()) return true;
  bool selected_any = false;
  for (const json& t : array_of(r.doc, "tests")) {
    if (text_of(t, "binary") != binary || !filter_selects(filter, text_of(t, "name"))) continue;
    selected_any = true;
    if (text_of(t, "component") == c.name) return true;
  }
  if (selected_any) return false;
  const std::vector<std::string> patterns = split_patterns(c.gpu_tests);
  return std::any_of(patterns.begin(), patterns.end(), [&](const std::string& p) { return filter_selects(filter, p); });
}

// The sanitizer runs of a record that ran component c's tests (ci/gpu-suite sanitize runs every
// component's: test_gpu launches every kernel; a run filtered to some components, as a session's
// own script may run it, is theirs alone). A run is clean (exit 0); a finding (exit 3, or errors
// counted); a test failing under a tool that counted no error (exit 1, errors 0: the test's
// failure is the tests verdict's); or cut short (a timeout's 124 or 137, with no error counted):
// the verdict is then incomplete, not failed.
StatusVerdict sanitizer_of(const Record& r, const StatusComponent& c) {
  std::vector<const json*> runs;
  for (const json& s : array_of(r.doc, "sanitizer"))
    if (run_covers(s, r, c)) runs.push_back(&s);
  if (runs.empty()) return {};
  StatusVerdict v = verdict_from(r);
  int clean = 0, cut = 0, findings = 0;
  for (const json* entry : runs) {
    const json& s = *entry;
    const int exit = s.contains("exit") && s["exit"].is_number_integer() ? s["exit"].get<int>() : -1;
    const bool counted = s.contains("errors") && s["errors"].is_number_integer();
    const int64_t errors = counted ? s["errors"].get<int64_t>() : 0;
    std::string run = "compute-sanitizer " + text_of(s, "tool") + " " + text_of(s, "binary");
    if (!text_of(s, "shard").empty()) run += " shard " + text_of(s, "shard");
    if (exit == 0 || (exit == 1 && counted && errors == 0)) {
      ++clean;
    } else if ((exit == 124 || exit == 137) && errors == 0) {
      ++cut;
      v.failures.push_back(run + ": cut short at its timeout (exit " + std::to_string(exit) + "), no error reported");
    } else {
      ++findings;
      v.failures.push_back(run + ": exit " + (exit == -1 ? std::string("missing") : std::to_string(exit)) +
                           (counted ? ", " + std::to_string(errors) + " errors" : ""));
    }
  }
  v.ok = v.failures.empty();
  v.incomplete = findings == 0 && cut > 0;
  v.summary = (v.ok ? "clean in " : std::to_string(clean) + " clean of ") + std::to_string(runs.size()) +
              " runs (memcheck, racecheck)" + (cut ? ", " + std::to_string(cut) + " cut short" : "");
  return v;
}

// Goals named for `component`, or with `component` empty those naming none (schema 1).
StatusVerdict goals_of(const Record& r, const std::string& component) {
  int met = 0, judged = 0;
  std::vector<std::string> missed;
  for (const json& g : array_of(r.doc, "goals")) {
    if (text_of(g, "component") != component) continue;
    ++judged;
    if (g.contains("met") && g["met"] == true) {
      ++met;
      continue;
    }
    const std::string unit = text_of(g, "unit");
    missed.push_back("missed: " + text_of(g, "goal") + " (" + (g.contains("value") ? g["value"].dump() : "no value") +
                     (unit.empty() ? "" : " " + unit) + ")");
  }
  if (judged == 0) return {};
  StatusVerdict v = verdict_from(r);
  v.ok = missed.empty();
  v.summary = "met " + std::to_string(met) + "/" + std::to_string(judged);
  v.failures = missed;
  return v;
}

// The later of two verdicts by date; records sort by file name, so the later file wins a tie.
void keep_latest(StatusVerdict& best, StatusVerdict candidate) {
  if (candidate.found && (!best.found || candidate.date >= best.date)) best = std::move(candidate);
}

}  // namespace

std::vector<StatusComponent> status_components(const json& listed, const std::string& source) {
  if (!listed.is_object() || !listed.contains("components") || !listed["components"].is_array())
    throw BadInput(source + ": components: expected the array of `dsv4h list --json`");
  std::vector<StatusComponent> components;
  for (const json& c : listed["components"]) {
    StatusComponent s{text_of(c, "name"), {}, {}, text_of(c, "gpu_tests")};
    if (s.name.empty()) throw BadInput(source + ": components[].name: expected a string");
    for (const json& m : array_of(c, "mutants")) {
      s.mutants.push_back(text_of(m, "name"));
      for (const json& k : array_of(m, "kernel_sources"))
        if (k.is_string() && std::find(s.kernel_sources.begin(), s.kernel_sources.end(), k) == s.kernel_sources.end())
          s.kernel_sources.push_back(k);
    }
    // A step declares no mutants of its own: its kernel sources are listed apart (from 2026-12-06).
    for (const json& k : array_of(c, "kernel_sources"))
      if (k.is_string() && std::find(s.kernel_sources.begin(), s.kernel_sources.end(), k) == s.kernel_sources.end())
        s.kernel_sources.push_back(k);
    components.push_back(std::move(s));
  }
  // The models (the tiny model): tests and goals, no mutants of a descriptor.
  for (const json& m : array_of(listed, "models")) {
    StatusComponent s{text_of(m, "name"), {}, {}, text_of(m, "gpu_tests")};
    if (s.name.empty()) throw BadInput(source + ": models[].name: expected a string");
    for (const json& k : array_of(m, "kernel_sources"))
      if (k.is_string()) s.kernel_sources.push_back(k);
    components.push_back(std::move(s));
  }
  return components;
}

Status build_status(const std::string& records_dir, const std::vector<StatusComponent>& components,
                    const KernelChanges& kernel_changes) {
  Status status;
  status.records_dir = records_dir;
  for (const StatusComponent& c : components) status.components.push_back({c.name, {}, {}, {}, {}});
  std::vector<std::map<std::string, MutantVerdict>> mutants(components.size());
  for (const std::string& path : json_files_in(records_dir)) {
    const Record r{path.substr(path.find_last_of('/') + 1), read_json_file(path)};
    // Diagnostics and A/B experiments hold no verdict (and some no commit or date).
    if (!r.doc.is_object() || text_of(r.doc, "commit").empty() || text_of(r.doc, "date").empty() ||
        (r.doc.contains("kind") && r.doc["kind"] != "suite"))
      continue;
    bool holds_verdict = false;
    for (const char* key : {"tests", "mutants", "perturb", "sanitizer", "goals", "verify"})
      holds_verdict = holds_verdict || r.doc.contains(key);
    if (!holds_verdict) continue;
    ++status.records_read;
    for (size_t i = 0; i < components.size(); ++i) {
      ComponentStatus& s = status.components[i];
      keep_latest(s.tests, tests_of(r, components[i].name));
      for (auto& [name, m] : mutants_of(r, components[i], components)) {
        const auto it = mutants[i].find(name);
        if (it == mutants[i].end() || m.from.date >= it->second.from.date) mutants[i][name] = std::move(m);
      }
      keep_latest(s.sanitizer, sanitizer_of(r, components[i]));
      keep_latest(s.goals, goals_of(r, components[i].name));
    }
    keep_latest(status.unattributed_goals, goals_of(r, ""));
  }
  for (size_t i = 0; i < components.size(); ++i) status.components[i].mutants = joined_mutants(mutants[i], components[i]);
  for (size_t i = 0; i < components.size(); ++i)
    for (StatusVerdict* v : {&status.components[i].tests, &status.components[i].mutants, &status.components[i].sanitizer,
                       &status.components[i].goals})
      if (v->found)
        v->kernels_changed = components[i].kernel_sources.empty()
                                 ? "unknown: the component names no kernel source"
                                 : kernel_changes(v->commit, components[i].kernel_sources);
  return status;
}

}  // namespace dsv4h::report
