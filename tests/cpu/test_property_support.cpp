// The property-test support itself: boundary bias, and regressions written where ctest finds them.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "harness/case_file.h"
#include "harness/component.h"
#include "harness/property.h"

namespace dsv4h {
namespace {

TEST(PropertySupport, BoundarySizesComeUpOften) {
  const rc::Gen<int64_t> gen = property::boundary_size(0, 1000, {64});
  std::set<int64_t> seen;
  int boundary = 0;
  for (int i = 0; i < 2000; ++i) {
    const int64_t v = gen(rc::Random(i), 100).value();
    ASSERT_GE(v, 0);
    ASSERT_LE(v, 1000);
    seen.insert(v);
    boundary += v == 0 || v == 1 || v == 63 || v == 65 || v == 127 || v == 129 || v == 255 || v == 257;
  }
  for (int64_t edge : {0, 1, 63, 64, 65, 127, 128, 129, 767, 768, 769}) EXPECT_TRUE(seen.count(edge)) << edge;
  EXPECT_GT(boundary, 100);
}

// The smallest size from which `fails` holds, as RapidCheck shrinks boundary_size: the last failing
// run of a property is its shrunk counterexample (what save_regression relies on).
int64_t shrunk_size(int64_t fails_from) {
  int64_t last_failing = -1;
  const bool ok = rc::check("fails from " + std::to_string(fails_from), [&] {
    const int64_t rows = *property::boundary_size(0, 5000, {64, 256});
    if (rows >= fails_from) {
      last_failing = rows;
      RC_FAIL("too many rows");
    }
  });
  EXPECT_FALSE(ok);
  return last_failing;
}

TEST(PropertySupport, ShrinksToTheSmallestFailingSize) {
  EXPECT_EQ(shrunk_size(63), 63);  // a boundary (tile - 1): found exactly
  EXPECT_EQ(shrunk_size(129), 129);
  EXPECT_LE(shrunk_size(3), 4);    // between boundaries: the next boundary at worst
}

TEST(PropertySupport, SavedRegressionLoadsBackAsTheSameCase) {
  const std::string dir = (std::filesystem::temp_directory_path() / ("dsv4h_regr_" + std::to_string(::getpid()))).string();
  ::setenv("DSV4H_REGRESSION_DIR", dir.c_str(), 1);
  const Case c = parse_case("filtered_silu_mul(rows=129,inter=13,kept=0.5,step=16,seed=5)");
  const std::string path = property::save_regression(c, "filtered_silu_mul-example", "example");
  ::unsetenv("DSV4H_REGRESSION_DIR");
  EXPECT_EQ(load_case_file(path).test_case.str(), c.str());
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace dsv4h
