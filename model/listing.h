// What the harness's tools know of the model (issue 31), as a component's descriptor tells them of
// a component: its GPU tests, its benchmarks (tests/bench/bench_model.cpp) and their goals, which
// ci/goals.py judges, and its sources. The model is not a component (no descriptor): `dsv4h list
// --json` lists it under "models", beside the components, with these fields named as a component's.
#pragma once

#include <string>
#include <vector>

namespace dsv4h::model {

struct ModelListing {
  const char* name;
  const char* bench_binary;
  const char* bench_filter;
  const char* goals;  // JSON, as a descriptor's goals (harness/descriptor.h)
  const char* gpu_tests;  // its GPU tests, a gtest filter (ci/gpu-report.py attributes them by it)
  // Its own GPU sources beside the kernels of every component (it runs them all), as paths in the
  // checkout: `dsv4h report status` flags its verdicts when any of them changed after the run.
  std::vector<std::string> own_sources;
};

const ModelListing& listing();

}  // namespace dsv4h::model
