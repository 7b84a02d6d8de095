// The current verdict of every component (`dsv4h report status`): from the GPU run records of
// reports/gpu/ (reports/gpu/README.md, schema 1 and 2), per component the latest record holding
// its tests, its mutants, the sanitizer runs and its goals, each with the commit, card and date it
// came from, and whether its kernels changed in git after that commit. A verdict spread over
// records of several commits and cards is what a user would otherwise join by hand.
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dsv4h::report {

// What the status needs of a component (`dsv4h list --json`, or the running dsv4h's registry).
struct StatusComponent {
  std::string name;
  std::vector<std::string> mutants;         // the mutants its descriptor declares
  // File names under kernels/, and paths in the checkout outside it (the model's model/gpu).
  std::vector<std::string> kernel_sources;
  std::string gpu_tests;  // its GPU tests, a gtest filter (list --json's gpu_tests)
};

// The components of a `dsv4h list --json` document; BadInput naming the field where malformed.
std::vector<StatusComponent> status_components(const nlohmann::json& listed, const std::string& source);

// One verdict (tests, mutants, sanitizer, goals) of a component, from the latest record holding it.
struct StatusVerdict {
  bool found = false;  // no record holds it: nothing else is set
  std::string record, commit, card, date;
  bool ok = true;
  bool incomplete = false;            // not ok only for what the record lacks (a mutant never run)
  std::string summary;                // "212 passed, 0 failed, 3 skipped", "caught 5/5", ...
  std::vector<std::string> failures;  // each failure with its message and reproduction where recorded
  std::string kernels_changed;        // "" unchanged; else what changed since `commit`, or why unknown
};

struct ComponentStatus {
  std::string name;
  StatusVerdict tests, mutants, sanitizer, goals;
};

struct Status {
  std::string records_dir;
  int records_read = 0;  // those holding a verdict (diagnostics and A/B experiments hold none)
  std::vector<ComponentStatus> components;
  // The latest goals that name no component (records before schema 2): shown apart, never guessed.
  StatusVerdict unattributed_goals;
};

// The kernel sources of `sources` (and the headers they include) changed after `commit`: "" where
// none did, else a line naming them, or "unknown: why".
using KernelChanges = std::function<std::string(const std::string& commit, const std::vector<std::string>& sources)>;

// Asks git in the checkout holding `dir` (`git log COMMIT..HEAD -- kernels/...`); every answer is
// "unknown: ..." where `dir` is in no git checkout.
KernelChanges git_kernel_changes(const std::string& dir);

Status build_status(const std::string& records_dir, const std::vector<StatusComponent>& components,
                    const KernelChanges& kernel_changes);

std::string status_text(const Status& status);
std::string status_markdown(const Status& status);

}  // namespace dsv4h::report
