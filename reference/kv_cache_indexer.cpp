#include "kv_cache_indexer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "narrow_float.h"

namespace dsv4h::reference {

int indexer_scale_exponent(float amax) {
  const double s = std::max(static_cast<double>(amax), static_cast<double>(1e-4f)) / 448.0;
  int exponent = 0;
  const double mantissa = std::frexp(s, &exponent);  // s = mantissa * 2^exponent, mantissa in [0.5, 1)
  return mantissa == 0.5 ? exponent - 1 : exponent;  // ceil(log2(s)), exact
}

void indexer_pack_entry(const uint16_t* key_bf16, int64_t entries_per_page, int64_t t, uint8_t* page) {
  float amax = 0;
  for (int i = 0; i < kIndexerDims; ++i) amax = std::max(amax, std::fabs(bf16_to_float(key_bf16[i])));
  const int e = indexer_scale_exponent(amax);
  uint8_t* values = page + t * kIndexerDataBytes;
  for (int i = 0; i < kIndexerDims; ++i)
    values[i] = double_to_fp8_e4m3(std::ldexp(double{bf16_to_float(key_bf16[i])}, -e));
  const float scale = std::ldexp(1.f, e);
  std::memcpy(page + entries_per_page * kIndexerDataBytes + t * 4, &scale, 4);
}

void indexer_unpack_entry(const uint8_t* page, int64_t entries_per_page, int64_t t, float* key) {
  float scale;
  std::memcpy(&scale, page + entries_per_page * kIndexerDataBytes + t * 4, 4);
  const uint8_t* values = page + t * kIndexerDataBytes;
  for (int i = 0; i < kIndexerDims; ++i) key[i] = fp8_e4m3_to_float(values[i]) * scale;
}

}  // namespace dsv4h::reference
