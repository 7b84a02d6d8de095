#include "gpu_slot.h"

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <string>

#include "errors.h"

namespace dsv4h {
namespace {

// One GPU per group: "id:3,slots:1"; several "id:..." entries (separated by ';') would be a spec
// that asks for more than one.
int ordinal_of_group(int group, const char* gpus_value) {
  const std::string gpus = gpus_value ? gpus_value : "";
  std::smatch m;
  static const std::regex one_gpu("id:([0-9]{1,4}),slots:[0-9]{1,6}");
  if (!std::regex_match(gpus, m, one_gpu))
    throw BadInput("CTEST_RESOURCE_GROUP_" + std::to_string(group) +
                   "_GPUS: expected 'id:<ordinal>,slots:<n>' (one GPU, from a resource spec whose GPU ids are "
                   "device ordinals), got '" + gpus + "'");
  return std::stoi(m[1].str());
}

}  // namespace

int parse_assigned_gpu(const char* group_count, const char* group0_gpus) {
  if (!group_count || !*group_count) return 0;
  if (std::string(group_count) != "1")
    throw BadInput("CTEST_RESOURCE_GROUP_COUNT: a GPU test asks for one resource group, got '" +
                   std::string(group_count) + "'");
  return ordinal_of_group(0, group0_gpus);
}

int assigned_gpu() {
  return parse_assigned_gpu(std::getenv("CTEST_RESOURCE_GROUP_COUNT"), std::getenv("CTEST_RESOURCE_GROUP_0_GPUS"));
}

std::vector<int> parse_assigned_gpus(const char* group_count, const std::vector<const char*>& groups, int ranks) {
  std::vector<int> ordinals;
  if (!group_count || !*group_count) {
    for (int r = 0; r < ranks; ++r) ordinals.push_back(r);
    return ordinals;
  }
  if (std::string(group_count) != std::to_string(ranks))
    throw BadInput("CTEST_RESOURCE_GROUP_COUNT: a test of " + std::to_string(ranks) + " ranks asks for " +
                   std::to_string(ranks) + " resource groups (RESOURCE_GROUPS \"" + std::to_string(ranks) +
                   ",gpus:1\"), got '" + group_count + "'");
  for (int r = 0; r < ranks; ++r) {
    const int ordinal = ordinal_of_group(r, r < static_cast<int>(groups.size()) ? groups[r] : nullptr);
    if (std::find(ordinals.begin(), ordinals.end(), ordinal) != ordinals.end())
      throw BadInput("CTEST_RESOURCE_GROUP_" + std::to_string(r) + "_GPUS: GPU " + std::to_string(ordinal) +
                     " was given to an earlier rank too; NCCL needs one GPU per rank (a resource spec of one "
                     "slot per GPU: ci/gpu-resources --slots 1)");
    ordinals.push_back(ordinal);
  }
  return ordinals;
}

std::vector<int> assigned_gpus(int ranks) {
  std::vector<const char*> groups;
  for (int r = 0; r < ranks; ++r) groups.push_back(std::getenv(("CTEST_RESOURCE_GROUP_" + std::to_string(r) + "_GPUS").c_str()));
  return parse_assigned_gpus(std::getenv("CTEST_RESOURCE_GROUP_COUNT"), groups, ranks);
}

}  // namespace dsv4h
