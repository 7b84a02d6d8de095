// The model's benchmarks (issue 31; tests/bench/bench_model.cpp) and their goals, as data that
// ci/goals.py judges. The model is not a component (no descriptor): `dsv4h list --json` lists it
// under "models", beside the components, with these fields named as a component's.
#pragma once

namespace dsv4h::model {

struct BenchGoals {
  const char* name;
  const char* bench_binary;
  const char* bench_filter;
  const char* goals;  // JSON, as a descriptor's goals (harness/descriptor.h)
};

const BenchGoals& bench_goals();

}  // namespace dsv4h::model
