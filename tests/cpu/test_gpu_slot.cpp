// The GPU a test runs on under `ctest --resource-spec-file` (issue 32): the ordinal CTest's
// allocation names, device 0 without one, and a clear error naming the variable where it is malformed.
#include <gtest/gtest.h>

#include "harness/errors.h"
#include "harness/gpu_slot.h"

namespace dsv4h {
namespace {

TEST(GpuSlot, TheAllocatedOrdinalOrDeviceZero) {
  EXPECT_EQ(parse_assigned_gpu(nullptr, nullptr), 0);
  EXPECT_EQ(parse_assigned_gpu("", "id:5,slots:1"), 0);
  EXPECT_EQ(parse_assigned_gpu("1", "id:0,slots:1"), 0);
  EXPECT_EQ(parse_assigned_gpu("1", "id:7,slots:12"), 7);
}

TEST(GpuSlot, MalformedAllocationsNameTheVariable) {
  const auto message = [](const char* count, const char* gpus) {
    try {
      parse_assigned_gpu(count, gpus);
    } catch (const BadInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("2", "id:0,slots:1").find("CTEST_RESOURCE_GROUP_COUNT"), std::string::npos);
  for (const char* gpus : {"", "id:0", "id:a,slots:1", "id:0,slots:1;id:1,slots:1", "id:99999,slots:1"})
    EXPECT_NE(message("1", gpus).find("CTEST_RESOURCE_GROUP_0_GPUS"), std::string::npos) << gpus;
  EXPECT_NE(message("1", nullptr).find("CTEST_RESOURCE_GROUP_0_GPUS"), std::string::npos);
}

TEST(GpuSlot, EveryRankOfAMultiGpuTestGetsItsOwnGpu) {
  EXPECT_EQ(parse_assigned_gpus(nullptr, {}, 4), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(parse_assigned_gpus("2", {"id:3,slots:1", "id:1,slots:1"}, 2), (std::vector<int>{3, 1}));
  EXPECT_EQ(parse_assigned_gpus("1", {"id:6,slots:1"}, 1), (std::vector<int>{6}));
  const auto message = [](const char* count, const std::vector<const char*>& groups, int ranks) {
    try {
      parse_assigned_gpus(count, groups, ranks);
    } catch (const BadInput& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("1", {"id:0,slots:1"}, 2).find("CTEST_RESOURCE_GROUP_COUNT"), std::string::npos);
  EXPECT_NE(message("2", {"id:0,slots:1", nullptr}, 2).find("CTEST_RESOURCE_GROUP_1_GPUS"), std::string::npos);
  EXPECT_NE(message("2", {"id:0,slots:1", "id:x"}, 2).find("CTEST_RESOURCE_GROUP_1_GPUS"), std::string::npos);
  const std::string shared = message("2", {"id:2,slots:1", "id:2,slots:1"}, 2);
  EXPECT_NE(shared.find("CTEST_RESOURCE_GROUP_1_GPUS"), std::string::npos) << shared;
  EXPECT_NE(shared.find("one GPU per rank"), std::string::npos) << shared;
}

}  // namespace
}  // namespace dsv4h
