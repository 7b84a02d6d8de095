// Which GPU this process runs on: the one CTest's resource allocation gave it (a test with
// RESOURCE_GROUPS "gpus:1", run by `ctest --resource-spec-file`, finds it in
// CTEST_RESOURCE_GROUP_0_GPUS as "id:<ordinal>,slots:<n>"), else device 0. Read without touching
// the GPU runtime, so that a malformed allocation is a clear error even on a machine without one.
#pragma once

namespace dsv4h {

// The device ordinal, from the environment. Throws BadInput naming the variable where it is malformed.
int assigned_gpu();

// The same from the two variables' values (either may be null).
int parse_assigned_gpu(const char* group_count, const char* group0_gpus);

}  // namespace dsv4h
