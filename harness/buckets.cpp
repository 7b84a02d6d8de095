#include "gpu_backend.h"

namespace dsv4h {

std::vector<int64_t> default_buckets(int64_t max_batch) {
  std::vector<int64_t> buckets;
  for (int64_t b : {1, 2, 4, 8, 16, 24, 32, 48, 64})
    if (b < max_batch) buckets.push_back(b);
  for (int64_t b = 96; b < max_batch; b += 32) buckets.push_back(b);
  buckets.push_back(max_batch);
  return buckets;
}

}  // namespace dsv4h
