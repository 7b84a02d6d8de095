// Which GPU this process runs on: the one CTest's resource allocation gave it (a test with
// RESOURCE_GROUPS "gpus:1", run by `ctest --resource-spec-file`, finds it in
// CTEST_RESOURCE_GROUP_0_GPUS as "id:<ordinal>,slots:<n>"), else device 0. Read without touching
// the GPU runtime, so that a malformed allocation is a clear error even on a machine without one.
// A test of several ranks (RESOURCE_GROUPS "R,gpus:1", one group per rank) reads every group's.
#pragma once

#include <vector>

namespace dsv4h {

// The device ordinal, from the environment. Throws BadInput naming the variable where it is malformed.
int assigned_gpu();

// The same from the two variables' values (either may be null).
int parse_assigned_gpu(const char* group_count, const char* group0_gpus);

// The ordinals of `ranks` ranks, rank i's from CTEST_RESOURCE_GROUP_<i>_GPUS; without an allocation
// 0 .. ranks - 1. Throws BadInput naming the variable where one is malformed, where the count is
// not `ranks`, or where two ranks got the same GPU (a spec of more than one slot per GPU).
std::vector<int> assigned_gpus(int ranks);

// The same from the variables' values: group_count, and groups[i] that of CTEST_RESOURCE_GROUP_<i>_GPUS.
std::vector<int> parse_assigned_gpus(const char* group_count, const std::vector<const char*>& groups, int ranks);

}  // namespace dsv4h
