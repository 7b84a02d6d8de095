// The model's benchmarks (issue 31; tests/bench/bench_model.cpp) and their goals, as data that
// ci/goals.py judges. The model is not a component (no descriptor): `dsv4h list --json` lists it
// under "models", beside the components, with these fields named as a component's.
#pragma once

#include <string>
#include <vector>

namespace dsv4h::model {

struct BenchGoals {
  const char* name;
  const char* bench_binary;
  const char* bench_filter;
  const char* goals;  // JSON, as a descriptor's goals (harness/descriptor.h)
  const char* gpu_tests;  // its GPU tests, a gtest filter (ci/gpu-report.py attributes them by it)
  // Its own GPU sources beside the kernels of every component (it runs them all), as paths in the
  // checkout: `dsv4h report status` flags its verdicts when any of them changed after the run.
  std::vector<std::string> own_sources;
};

const BenchGoals& bench_goals();

}  // namespace dsv4h::model
