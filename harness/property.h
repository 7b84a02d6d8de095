// Property-test support: generators biased towards the sizes where kernels break, and the
// regression store where a shrunk counterexample becomes a permanent ctest case.
#pragma once

#include <rapidcheck.h>

#include <string>
#include <vector>

#include "case_spec.h"

namespace dsv4h::property {

// Sizes in [lo, hi], about half of them from the boundary set: 0 and 1, each tile and tile +- 1,
// multiples of 4, multiples of 128 and 128k +- 1 (those inside [lo, hi]).
rc::Gen<int64_t> boundary_size(int64_t lo, int64_t hi, const std::vector<int64_t>& tiles);

// $DSV4H_REGRESSION_DIR, else the source tree's fixtures/regressions.
std::string regression_dir();

// Writes `c` as <regression_dir>/<name>.json with `why` as its note and returns the path. A
// property calls this on every failing run; RapidCheck's shrinking fails last on the minimal case,
// so the file left behind holds the shrunk counterexample.
std::string save_regression(const Case& c, const std::string& name, const std::string& why);

}  // namespace dsv4h::property
