// dsv4h fuzz's machinery without a GPU: a stand-in backend that computes the reference and breaks
// one element from a batch of 6 on must be caught, shrunk to batch 6 exactly, and saved as a
// regression fixture that reproduces it; a correct backend passes every drawn case; draws favour
// the boundary sizes and repeat for a seed.
#include <gtest/gtest.h>

#include <filesystem>

#include "harness/case_file.h"
#include "harness/fuzz.h"
#include "harness/poison.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

class ReferenceBackend : public GpuBackend {
 public:
  explicit ReferenceBackend(int64_t broken_from) : broken_from_(broken_from) {}
  std::string device_name() const override { return "reference stand-in"; }
  TensorMap run(const Component& component, const Case& c, const TensorMap& inputs, Poison poison) override {
    TensorMap outputs = reference_outputs(component, c, inputs, poison);
    if (c.integer(component.batch_param) >= broken_from_) {
      HostTensor& first = outputs.begin()->second;
      first.set_bits(0, first.bits(0) ^ 1);
    }
    return outputs;
  }
  ReplayResult graph_replay(const Component& component, const Case& c, const ReplayOptions& options) override {
    component.pad_batch(c, component.make_inputs(c), options.max_batch);  // refuses what no engine pads
    ReplayResult r;
    r.batches_checked = options.max_batch;
    return r;
  }

 private:
  int64_t broken_from_;
};

FuzzOptions options_in(const std::string& dir, int64_t cases) {
  FuzzOptions o;
  o.seconds = 60;
  o.max_cases = cases;
  o.seed = 5;
  o.max_batch = 64;
  o.regression_dir = dir;
  return o;
}

TEST(Fuzz, CatchesShrinksAndSavesAFailure) {
  const std::string dir = ::testing::TempDir() + "/fuzz-regressions";
  std::filesystem::create_directories(dir);
  ReferenceBackend broken(6);
  const FuzzResult r = fuzz_component(registry().get("mtp_expand"), &broken, options_in(dir, 200));
  ASSERT_EQ(r.failures.size(), 1u) << "a backend wrong from batch 6 on passed " << r.cases << " cases";
  const FuzzFailure& f = r.failures[0];
  EXPECT_NE(f.shrunk_case.find("bs=6,"), std::string::npos) << "shrunk to " << f.shrunk_case;
  const CaseFile saved = load_case_file(f.fixture);
  EXPECT_EQ(saved.test_case.str(), f.shrunk_case);
  ReferenceBackend again(6);
  const CaseRun rerun = run_case(registry().get("mtp_expand"), saved.test_case, &again);
  EXPECT_FALSE(rerun.result.passed()) << "the saved case must reproduce the failure";
}

TEST(Fuzz, CorrectBackendPassesEveryDrawnCase) {
  const std::string dir = ::testing::TempDir() + "/fuzz-none";
  std::filesystem::create_directories(dir);
  ReferenceBackend correct(1 << 30);
  for (const char* name : {"filtered_silu_mul", "mtp_expand"}) {
    const FuzzResult r = fuzz_component(registry().get(name), &correct, options_in(dir, 40));
    EXPECT_TRUE(r.failures.empty()) << name << ": " << r.failures[0].report;
    EXPECT_EQ(r.cases, 40) << name;
    EXPECT_GT(r.replays, 0) << name << ": batches up to 64 are replayed too";
    EXPECT_LE(r.replays, r.cases) << name;
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "nothing is saved without a failure";
}

TEST(Fuzz, BoundaryBatchesAndDeterminism) {
  const std::vector<int64_t> edges = boundary_batches(300);
  for (int64_t b : {1, 2, 3, 7, 8, 9, 63, 64, 65, 255, 256, 257}) EXPECT_NE(std::find(edges.begin(), edges.end(), b), edges.end()) << b;
  for (int64_t b : edges) EXPECT_TRUE(b >= 1 && b <= 300) << b;
  const std::string dir = ::testing::TempDir();
  ReferenceBackend broken(20);
  const FuzzResult a = fuzz_component(registry().get("mtp_expand"), &broken, options_in(dir, 100));
  const FuzzResult b = fuzz_component(registry().get("mtp_expand"), &broken, options_in(dir, 100));
  ASSERT_FALSE(a.failures.empty());
  EXPECT_EQ(a.failures[0].drawn_case, b.failures[0].drawn_case) << "a seed draws the same cases";
  EXPECT_EQ(a.cases, b.cases);
}

}  // namespace
}  // namespace dsv4h
