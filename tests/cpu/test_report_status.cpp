// `dsv4h report status` over a folder of small synthetic records of both schemas: each verdict
// from the latest record holding it, with its commit, card and date; failures with their
// messages and reproduction lines; goals that name no component kept apart; records of other
// kinds ignored; and the kernels-changed flag, from a stand-in and from a real git history.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "harness/errors.h"
#include "perf/status.h"
#include "report_synthetic.h"

namespace dsv4h::report {
namespace {

using nlohmann::json;

const std::vector<StatusComponent> kComponents = {{"alpha", {"alpha_broken", "alpha_race"}, {"alpha.hip"}, ""},
                                                  {"beta", {}, {}, ""}};

// Schema 1, as the records of 2026-12-02..05 are (migrated): goals without a component, the first
// records' mutant "verdict", a verify card with its backend's suffix.
json old_suite() {
  return {{"schema_version", 1}, {"kind", "suite"}, {"commit", "aaaa111"}, {"date", "2026-12-02T10:00:00Z"},
          {"device", "Synthetic GPU (nvidia, device 0)"},
          {"tests", {{{"binary", "test_gpu"}, {"name", "Alpha.Works"}, {"component", "alpha"}, {"status", "pass"}},
                     {{"binary", "test_gpu"}, {"name", "Beta.Works"}, {"component", "beta"}, {"status", "pass"}}}},
          {"mutants", {{{"mutant", "alpha_broken"}, {"verdict", "caught"}}}},
          {"sanitizer", {{{"tool", "memcheck"}, {"binary", "test_gpu"}, {"exit", 0}}}},
          {"goals", {{{"goal", "old goal"}, {"met", false}, {"value", 0.5}}}}};
}

// Schema 2, later: a failed test with its message and reproduction, a survived mutant, a race
// mutant caught by a perturbed run, goals with their component, no sanitizer run.
json new_suite() {
  return {{"schema_version", 2}, {"kind", "suite"}, {"phases", {"tests", "mutants", "perturb", "goals"}},
          {"commit", "bbbb222"}, {"date", "2026-12-06T10:00:00Z"}, {"device", "Other GPU"},
          {"tests", {{{"binary", "test_gpu"}, {"name", "Alpha.Works"}, {"component", "alpha"}, {"status", "fail"},
                      {"message", "alpha(rows=3,seed=1): out[2] = 7, expected 5"},
                      {"reproduce", "dsv4h run --case 'alpha(rows=3,seed=1)'"}},
                     {{"binary", "test_gpu"}, {"name", "Alpha.Skips"}, {"component", "alpha"}, {"status", "skip"}}}},
          {"verify", {{"cases", {{{"case", "alpha(rows=1,seed=1)"}, {"status", "pass"}},
                                 {{"case", "batch_invariance(chunks=2):alpha(rows=4,seed=1)"}, {"status", "pass"}}}}}},
          {"mutants", {{{"mutant", "alpha_broken"}, {"caught", false}, {"status", "survived"}}}},
          {"perturb", {{{"mutant", "alpha_race"}, {"check", "perturbed"}, {"caught", true}},
                       {{"mutant", "alpha_race"}, {"check", "plain"}, {"caught", false}}}},
          {"goals", {{{"goal", "alpha fast"}, {"component", "alpha"}, {"met", true}, {"value", 0.9}},
                     {{"goal", "alpha faster"}, {"component", "alpha"}, {"met", false}, {"value", 0.7},
                      {"unit", "fraction of copy bandwidth"}}}}};
}

std::string records_dir() {
  const std::string dir = testing::fresh_dir("status_records");
  write_json_file(dir + "/2026-12-02-aaaa111-synthetic.json", old_suite());
  write_json_file(dir + "/2026-12-06-bbbb222-other.json", new_suite());
  // Newer, but neither holds a verdict: an A/B experiment and a diagnostic with tests of its own.
  write_json_file(dir + "/2026-12-07-cccc333-ab.json", {{"schema_version", 1}, {"kind", "experiment"},
                                                        {"base", "x"}, {"new", "y"}, {"results", json::array()}});
  json diagnostic = new_suite();
  diagnostic.update({{"kind", "diagnostic"}, {"date", "2026-12-08"}});
  write_json_file(dir + "/2026-12-08-dddd444-diag.json", diagnostic);
  return dir;
}

// Stands in for git: alpha's kernels changed after the old commit only.
std::string changed_after_old(const std::string& commit, const std::vector<std::string>& sources) {
  return commit == "aaaa111" ? "changed after aaaa111: kernels/" + sources.at(0) : "";
}

TEST(ReportStatus, EachVerdictFromTheLatestRecordHoldingIt) {
  const Status s = build_status(records_dir(), kComponents, changed_after_old);
  EXPECT_EQ(s.records_read, 2);
  ASSERT_EQ(s.components.size(), 2u);
  const ComponentStatus& alpha = s.components[0];

  ASSERT_TRUE(alpha.tests.found);
  EXPECT_EQ(alpha.tests.commit, "bbbb222");
  EXPECT_EQ(alpha.tests.card, "Other GPU");
  EXPECT_FALSE(alpha.tests.ok);
  EXPECT_EQ(alpha.tests.summary, "0 passed, 1 failed, 1 skipped; verify 2 passed, 0 failed");
  ASSERT_EQ(alpha.tests.failures.size(), 1u);
  EXPECT_NE(alpha.tests.failures[0].find("out[2] = 7, expected 5"), std::string::npos);
  EXPECT_NE(alpha.tests.failures[0].find("reproduce: dsv4h run --case 'alpha(rows=3,seed=1)'"), std::string::npos);
  EXPECT_EQ(alpha.tests.kernels_changed, "");

  EXPECT_EQ(alpha.mutants.summary, "caught 1/2");  // the race mutant by its perturbed run
  ASSERT_EQ(alpha.mutants.failures.size(), 1u);
  EXPECT_EQ(alpha.mutants.failures[0], "alpha_broken: survived");
  EXPECT_FALSE(alpha.mutants.incomplete);

  // The new record ran no sanitizer: the old record's verdict stands, flagged by the kernel change.
  EXPECT_EQ(alpha.sanitizer.commit, "aaaa111");
  EXPECT_EQ(alpha.sanitizer.card, "Synthetic GPU");
  EXPECT_TRUE(alpha.sanitizer.ok);
  EXPECT_EQ(alpha.sanitizer.kernels_changed, "changed after aaaa111: kernels/alpha.hip");

  EXPECT_EQ(alpha.goals.summary, "met 1/2");
  ASSERT_EQ(alpha.goals.failures.size(), 1u);
  EXPECT_EQ(alpha.goals.failures[0], "missed: alpha faster (0.7 fraction of copy bandwidth)");

  // Schema 1's goals name no component: never guessed, shown apart.
  ASSERT_TRUE(s.unattributed_goals.found);
  EXPECT_EQ(s.unattributed_goals.summary, "met 0/1");
  EXPECT_EQ(s.unattributed_goals.commit, "aaaa111");
}

TEST(ReportStatus, AComponentWithoutKernelSourcesOrRecordsSaysSo) {
  const Status s = build_status(records_dir(), kComponents, changed_after_old);
  const ComponentStatus& beta = s.components[1];
  EXPECT_EQ(beta.tests.commit, "aaaa111");  // the new record holds no test of beta
  EXPECT_EQ(beta.tests.kernels_changed, "unknown: the component names no kernel source");
  EXPECT_FALSE(beta.mutants.found);
  EXPECT_FALSE(beta.goals.found);
  const std::string text = status_text(s);
  EXPECT_NE(text.find("  mutants    no record"), std::string::npos);
  EXPECT_NE(text.find("  mutants    FAILED: caught 1/2"), std::string::npos);
  const std::string markdown = status_markdown(s);
  EXPECT_NE(markdown.find("## alpha"), std::string::npos);
  EXPECT_NE(markdown.find("| tests | **FAILED** 0 passed, 1 failed"), std::string::npos);
  EXPECT_NE(markdown.find("| **changed** |"), std::string::npos);
  EXPECT_NE(markdown.find("## Goals naming no component"), std::string::npos);
}

// A declared mutant that no record holds (new since the last run) leaves the verdict incomplete,
// which is not a failure of the kernels' checks.
TEST(ReportStatus, AMutantNoRunCheckedMakesTheVerdictIncomplete) {
  const std::vector<StatusComponent> more_mutants = {{"alpha", {"alpha_broken", "alpha_new"}, {"alpha.hip"}, ""}};
  const std::string dir = testing::fresh_dir("status_incomplete");
  write_json_file(dir + "/2026-12-02-aaaa111-synthetic.json", old_suite());
  const Status s = build_status(dir, more_mutants, changed_after_old);
  const StatusVerdict& mutants = s.components[0].mutants;
  EXPECT_FALSE(mutants.ok);
  EXPECT_TRUE(mutants.incomplete);
  EXPECT_EQ(mutants.summary, "caught 1/2");
  EXPECT_EQ(mutants.failures, (std::vector<std::string>{"alpha_new: in no record"}));
  EXPECT_NE(status_markdown(s).find("| mutants | **INCOMPLETE** caught 1/2"), std::string::npos);
}

// The sanitizer runs of 2026-12-06 on an H200: memcheck ran every test and counted no error, but a
// test failed under it (exit 1); racecheck was cut short at its timeout. Neither is a finding: the
// verdict is incomplete. A run that counted errors (exit 3) fails it.
TEST(ReportStatus, SanitizerRunsCutShortAreIncompleteAndAFailedTestIsNoFinding) {
  json record = old_suite();
  record["sanitizer"] = {{{"tool", "memcheck"}, {"binary", "test_gpu"}, {"exit", 1}, {"errors", 0}},
                         {{"tool", "racecheck"}, {"binary", "test_gpu"}, {"shard", "3/12"}, {"exit", 124}, {"errors", nullptr}},
                         {{"tool", "racecheck"}, {"binary", "test_gpu_graph"}, {"exit", 0}}};
  const std::string dir = testing::fresh_dir("status_sanitizer_cut");
  write_json_file(dir + "/2026-12-02-aaaa111-synthetic.json", record);
  StatusVerdict v = build_status(dir, kComponents, changed_after_old).components[0].sanitizer;
  EXPECT_FALSE(v.ok);
  EXPECT_TRUE(v.incomplete);
  EXPECT_EQ(v.summary, "2 clean of 3 runs (memcheck, racecheck), 1 cut short");
  EXPECT_EQ(v.failures, (std::vector<std::string>{
                            "compute-sanitizer racecheck test_gpu shard 3/12: cut short at its timeout (exit 124), no error reported"}));
  record["sanitizer"][0] = {{"tool", "memcheck"}, {"binary", "test_gpu"}, {"exit", 3}, {"errors", 2}};
  write_json_file(dir + "/2026-12-02-aaaa111-synthetic.json", record);
  v = build_status(dir, kComponents, changed_after_old).components[0].sanitizer;
  EXPECT_FALSE(v.incomplete);
  EXPECT_EQ(v.failures.front(), "compute-sanitizer memcheck test_gpu: exit 3, 2 errors");
}

// A later run of the tests and the perturb phase alone (its race mutants' runs, no mutant phase)
// gives the race mutant its latest verdict and leaves the others to the record that ran the mutants.
// A sanitizer run filtered to one component's tests (2026-12-06: memcheck and racecheck over
// test_gpu's sparse_attention tests) is that component's verdict, not every component's: the
// record's own tests of the run's binary say which components the filter selects, else their
// test patterns do.
TEST(ReportStatus, AFilteredSanitizerRunIsOnlyTheVerdictOfTheComponentsItRan) {
  const std::vector<StatusComponent> components = {{"alpha", {}, {"alpha.hip"}, "*alpha*:AlphaGpu.*"},
                                                   {"beta", {}, {"beta.hip"}, "*beta*"}};
  json record = old_suite();
  record["tests"] = {{{"binary", "test_gpu"}, {"name", "Cases/ComponentGpu.Matches/alpha_rows_1"}, {"component", "alpha"},
                      {"status", "pass"}},
                     {{"binary", "test_gpu"}, {"name", "Cases/ComponentGpu.Matches/beta_rows_1"}, {"component", "beta"},
                      {"status", "pass"}}};
  record["sanitizer"] = {{{"tool", "racecheck"}, {"binary", "test_gpu"}, {"filter", "*alpha*:AlphaGpu.*"}, {"exit", 0}}};
  const std::string dir = testing::fresh_dir("status_sanitizer_filtered");
  write_json_file(dir + "/r.json", record);
  Status status = build_status(dir, components, changed_after_old);
  EXPECT_TRUE(status.components[0].sanitizer.found);
  EXPECT_FALSE(status.components[1].sanitizer.found);
  // A negative pattern leaves a component out; the whole suite's filter keeps both.
  record["sanitizer"][0]["filter"] = "*-*beta*";
  write_json_file(dir + "/r.json", record);
  status = build_status(dir, components, changed_after_old);
  EXPECT_TRUE(status.components[0].sanitizer.found);
  EXPECT_FALSE(status.components[1].sanitizer.found);
  record["sanitizer"][0]["filter"] = "*-Cases/ModelGpu.*";
  write_json_file(dir + "/r.json", record);
  status = build_status(dir, components, changed_after_old);
  EXPECT_TRUE(status.components[0].sanitizer.found);
  EXPECT_TRUE(status.components[1].sanitizer.found);
  // The record's tests of the binary are alpha's alone (a record merged from a test run of alpha
  // and a sanitizer run of beta): a filter that selects none of them falls back to the patterns.
  record["tests"].erase(1);
  record["sanitizer"][0]["filter"] = "*beta*";
  write_json_file(dir + "/r.json", record);
  status = build_status(dir, components, changed_after_old);
  EXPECT_FALSE(status.components[0].sanitizer.found);
  EXPECT_TRUE(status.components[1].sanitizer.found);
  // No test of the run's binary in the record: the components' patterns are read as names.
  record["tests"] = json::array();
  write_json_file(dir + "/r.json", record);
  status = build_status(dir, components, changed_after_old);
  EXPECT_FALSE(status.components[0].sanitizer.found);
  EXPECT_TRUE(status.components[1].sanitizer.found);
}

TEST(ReportStatus, ARecordWithoutTheMutantPhaseHoldsOnlyItsRaceMutantsVerdicts) {
  const std::string dir = testing::fresh_dir("status_perturb_only");
  write_json_file(dir + "/2026-12-06-bbbb222-other.json", new_suite());
  json later = new_suite();
  later.update({{"phases", {"tests", "perturb"}}, {"commit", "eeee555"}, {"date", "2026-12-07T10:00:00Z"}});
  later["perturb"] = {{{"mutant", "alpha_race"}, {"check", "perturbed"}, {"caught", false}}};
  write_json_file(dir + "/2026-12-07-eeee555-perturb.json", later);
  const Status s = build_status(dir, kComponents, changed_after_old);
  const ComponentStatus& alpha = s.components[0];
  EXPECT_EQ(alpha.tests.commit, "eeee555");
  EXPECT_EQ(alpha.mutants.commit, "bbbb222");
  EXPECT_EQ(alpha.mutants.failures,
            (std::vector<std::string>{"alpha_broken: survived", "alpha_race: caught in no perturbed run"}));
}

// A later run of the mutants without the perturb phase holds no race mutant's verdict: each
// mutant keeps its latest verdict, the race mutant's from the earlier record, and the verdict names
// the older record (its commit is the one the kernels are compared with) and says which ran which.
TEST(ReportStatus, EachMutantKeepsItsLatestVerdict) {
  const std::string dir = testing::fresh_dir("status_mutants_joined");
  write_json_file(dir + "/2026-12-06-bbbb222-other.json", new_suite());
  json later = new_suite();
  later.update({{"phases", {"tests", "mutants"}}, {"commit", "eeee555"}, {"date", "2026-12-07T10:00:00Z"}});
  later["mutants"] = {{{"mutant", "alpha_broken"}, {"caught", true}}};
  later.erase("perturb");
  write_json_file(dir + "/2026-12-07-eeee555-mutants.json", later);
  const Status s = build_status(dir, kComponents, changed_after_old);
  const StatusVerdict& mutants = s.components[0].mutants;
  EXPECT_TRUE(mutants.ok);
  EXPECT_EQ(mutants.commit, "bbbb222");
  EXPECT_EQ(mutants.summary,
            "caught 2/2 (each mutant's latest run: 2026-12-06-bbbb222-other.json alpha_race; "
            "2026-12-07-eeee555-mutants.json alpha_broken)");
}

// The noop mutant is each component's verdict over its own tests: on 2026-12-06 one test of
// sparse attention passed with every kernel a no-op (the other components' tests all failed on
// mismatches), and a later noop run over the model's tests alone failed them all, none on a
// mismatch. A noop run without test lists ran every component's tests.
TEST(ReportStatus, TheNoopMutantIsTheVerdictOfTheComponentsWhoseTestsItRan) {
  const std::vector<StatusComponent> components = {{"alpha", {}, {}, "Alpha.*"}, {"beta", {}, {}, "Beta.*"},
                                                   {"gamma", {}, {}, "Gamma.*"}};
  const std::string dir = testing::fresh_dir("status_noop");
  json all = new_suite();
  all.update({{"phases", {"tests", "mutants"}}, {"commit", "ffff666"}});
  all["tests"] = {{{"binary", "test_gpu"}, {"name", "Alpha.Works"}, {"component", "alpha"}, {"status", "pass"}},
                  {{"binary", "test_gpu"}, {"name", "Beta.Works"}, {"component", "beta"}, {"status", "pass"}}};
  all["mutants"] = {{{"mutant", "noop"}, {"caught", false}, {"status", "survived"},
                     {"failed_tests", {"Beta.Works"}}, {"passed_tests", {"Alpha.Works"}}}};
  write_json_file(dir + "/2026-12-06-ffff666-all.json", all);
  json gamma = all;
  gamma.update({{"commit", "9999777"}, {"date", "2026-12-07T10:00:00Z"}});
  gamma["tests"] = json::array();
  gamma["mutants"] = {{{"mutant", "noop"}, {"caught", false}, {"status", "survived"},
                       {"failed_tests", {"Gamma.Works"}}, {"passed_tests", json::array()}}};
  write_json_file(dir + "/2026-12-07-9999777-gamma.json", gamma);
  Status s = build_status(dir, components, changed_after_old);
  EXPECT_FALSE(s.components[0].mutants.ok);
  EXPECT_EQ(s.components[0].mutants.summary, "caught 0/0, noop SURVIVED");
  EXPECT_EQ(s.components[0].mutants.failures,
            (std::vector<std::string>{"noop: a test of its passed with every kernel a no-op"}));
  EXPECT_TRUE(s.components[1].mutants.ok);
  EXPECT_EQ(s.components[1].mutants.summary, "caught 0/0, noop caught");
  EXPECT_EQ(s.components[1].mutants.commit, "ffff666");
  EXPECT_FALSE(s.components[2].mutants.ok);
  EXPECT_EQ(s.components[2].mutants.commit, "9999777");
  EXPECT_EQ(s.components[2].mutants.failures, (std::vector<std::string>{"noop: survived"}));

  // A record without tests of its own: its tests go to the component whose filter names them most
  // specifically, as ci/gpu-suite's record attributes them ("Gamma.*" selects gamma_routing's too).
  json routing = gamma;
  routing.update({{"commit", "7777999"}, {"date", "2026-12-07T11:00:00Z"}});
  routing["mutants"] = {{{"mutant", "noop"}, {"caught", true}, {"status", "caught"},
                         {"failed_tests", {"Gamma.Works"}}, {"passed_tests", {"Gamma.Routing"}}}};
  write_json_file(dir + "/2026-12-07-7777999-routing.json", routing);
  std::vector<StatusComponent> with_routing = components;
  with_routing.push_back({"gamma_routing", {}, {}, "Gamma.Routing*"});
  s = build_status(dir, with_routing, changed_after_old);
  EXPECT_TRUE(s.components[2].mutants.ok);
  EXPECT_EQ(s.components[2].mutants.commit, "7777999");
  EXPECT_FALSE(s.components[3].mutants.ok);
  EXPECT_EQ(s.components[3].mutants.failures,
            (std::vector<std::string>{"noop: a test of its passed with every kernel a no-op"}));

  json everything = all;
  everything.update({{"commit", "8888888"}, {"date", "2026-12-08T10:00:00Z"}});
  everything["mutants"] = {{{"mutant", "noop"}, {"caught", true}, {"status", "caught"}}};
  write_json_file(dir + "/2026-12-08-8888888-all.json", everything);
  s = build_status(dir, components, changed_after_old);
  for (const ComponentStatus& c : s.components) {
    EXPECT_TRUE(c.mutants.ok) << c.name;
    EXPECT_EQ(c.mutants.commit, "8888888") << c.name;
  }
}

TEST(ReportStatus, ReadsTheComponentsOfListJson) {
  const json listed = {{"schema_version", 1},
                       {"components", {{{"name", "alpha"}, {"gpu_tests", "*alpha*:AlphaGpu.*"},
                                        {"mutants", {{{"name", "m1"}, {"kernel_sources", {"a.hip", "b.hip"}}},
                                                     {{"name", "m2"}, {"kernel_sources", {"a.hip"}}}}}},
                                       {{"name", "step"}, {"mutants", json::array()}, {"kernel_sources", {"a.hip"}}}}},
                       {"models", {{{"name", "model"}, {"kernel_sources", {"model/gpu", "kernels"}}}}}};
  const std::vector<StatusComponent> c = status_components(listed, "list.json");
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2].name, "model");
  EXPECT_EQ(c[2].kernel_sources, (std::vector<std::string>{"model/gpu", "kernels"}));
  EXPECT_EQ(c[0].mutants, (std::vector<std::string>{"m1", "m2"}));
  EXPECT_EQ(c[0].kernel_sources, (std::vector<std::string>{"a.hip", "b.hip"}));
  EXPECT_EQ(c[1].kernel_sources, (std::vector<std::string>{"a.hip"}));
  EXPECT_EQ(c[0].gpu_tests, "*alpha*:AlphaGpu.*");
  EXPECT_TRUE(c[1].gpu_tests.empty());
  EXPECT_THROW(status_components(json::object(), "list.json"), BadInput);
}

TEST(ReportStatus, OutsideAGitCheckoutKernelChangesAreUnknown) {
  const KernelChanges changes = git_kernel_changes(testing::fresh_dir("status_no_git"));
  EXPECT_EQ(changes("aaaa111", {"alpha.hip"}), "unknown: the records are in no git checkout");
}

int git(const std::string& dir, const std::string& args) {
  return std::system(("git -C " + dir + " -c user.name=t -c user.email=t@t " + args + " >/dev/null 2>&1").c_str());
}

std::string head_of(const std::string& dir) {
  if (std::system(("git -C " + dir + " rev-parse HEAD >" + dir + "/.head").c_str()) != 0) return "";
  std::ifstream in(dir + "/.head");
  std::string head;
  in >> head;
  return head;
}

// A header the kernel includes changes after the run's commit: the kernel's verdict is stale.
TEST(ReportStatus, GitFindsAChangedHeaderOfAKernel) {
  const std::string dir = testing::fresh_dir("status_git");
  std::filesystem::create_directories(dir + "/kernels");
  std::filesystem::create_directories(dir + "/reports/gpu");
  std::ofstream(dir + "/kernels/alpha.hip") << "#include \"alpha.h\"\n";
  std::ofstream(dir + "/kernels/alpha.h") << "// v1\n";
  std::ofstream(dir + "/kernels/other.hip") << "// v1\n";
  ASSERT_EQ(git(dir, "init -q"), 0) << "git is needed";
  ASSERT_EQ(git(dir, "add -A") + git(dir, "commit -q -m one"), 0);
  const std::string run_commit = head_of(dir);
  const KernelChanges changes = git_kernel_changes(dir + "/reports/gpu");
  EXPECT_EQ(changes(run_commit, {"alpha.hip"}), "");

  std::ofstream(dir + "/kernels/other.hip") << "// v2\n";
  ASSERT_EQ(git(dir, "commit -q -am other"), 0);
  EXPECT_EQ(git_kernel_changes(dir + "/reports/gpu")(run_commit, {"alpha.hip"}), "");

  std::ofstream(dir + "/kernels/alpha.h") << "// v2\n";
  ASSERT_EQ(git(dir, "commit -q -am header"), 0);
  const std::string answer = git_kernel_changes(dir + "/reports/gpu")(run_commit, {"alpha.hip"});
  EXPECT_EQ(answer.rfind("changed after " + run_commit.substr(0, 7) + " in 1 commit", 0), 0u) << answer;
  EXPECT_NE(answer.find("kernels/alpha.h"), std::string::npos) << answer;
  EXPECT_EQ(answer.find("other.hip"), std::string::npos) << answer;
  EXPECT_EQ(changes("0000000", {"alpha.hip"}), "unknown: commit 0000000 is not in this checkout");
}

}  // namespace
}  // namespace dsv4h::report
