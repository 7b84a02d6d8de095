#include "gpu_slot.h"

#include <cstdlib>
#include <regex>
#include <string>

#include "errors.h"

namespace dsv4h {

int parse_assigned_gpu(const char* group_count, const char* group0_gpus) {
  if (!group_count || !*group_count) return 0;
  if (std::string(group_count) != "1")
    throw BadInput("CTEST_RESOURCE_GROUP_COUNT: a GPU test asks for one resource group, got '" +
                   std::string(group_count) + "'");
  // One GPU per test: "id:3,slots:1"; several "id:..." entries (separated by ';') would be a spec
  // that asks for more than one.
  const std::string gpus = group0_gpus ? group0_gpus : "";
  std::smatch m;
  static const std::regex one_gpu("id:([0-9]{1,4}),slots:[0-9]{1,6}");
  if (!std::regex_match(gpus, m, one_gpu))
    throw BadInput("CTEST_RESOURCE_GROUP_0_GPUS: expected 'id:<ordinal>,slots:<n>' (one GPU, from a resource "
                   "spec whose GPU ids are device ordinals), got '" + gpus + "'");
  return std::stoi(m[1].str());
}

int assigned_gpu() {
  return parse_assigned_gpu(std::getenv("CTEST_RESOURCE_GROUP_COUNT"), std::getenv("CTEST_RESOURCE_GROUP_0_GPUS"));
}

}  // namespace dsv4h
