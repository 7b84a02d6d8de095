#include "kv_cache_model1.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "narrow_float.h"

namespace dsv4h::reference {

int64_t model1_page_bytes(int64_t tokens_per_page) {
  return (tokens_per_page * kModel1TokenBytes + kModel1DataBytes - 1) / kModel1DataBytes * kModel1DataBytes;
}

int model1_scale_exponent(float amax) {
  const double s = std::max(static_cast<double>(amax) / 448.0, static_cast<double>(1e-4f));
  int exponent = 0;
  const double mantissa = std::frexp(s, &exponent);  // s = mantissa * 2^exponent, mantissa in [0.5, 1)
  return mantissa == 0.5 ? exponent - 1 : exponent;  // ceil(log2(s)), exact
}

void model1_pack_token(const uint16_t* latent_bf16, int64_t tokens_per_page, int64_t t, uint8_t* page) {
  uint8_t* data = page + t * kModel1DataBytes;
  uint8_t* scales = page + tokens_per_page * kModel1DataBytes + t * 8;
  for (int tile = 0; tile < kModel1Tiles; ++tile) {
    const uint16_t* x = latent_bf16 + tile * kModel1TileDims;
    float amax = 0;
    for (int i = 0; i < kModel1TileDims; ++i) amax = std::max(amax, std::fabs(bf16_to_float(x[i])));
    const int e = model1_scale_exponent(amax);
    scales[tile] = static_cast<uint8_t>(e + 127);
    for (int i = 0; i < kModel1TileDims; ++i)
      data[tile * kModel1TileDims + i] = double_to_fp8_e4m3(std::ldexp(double{bf16_to_float(x[i])}, -e));
  }
  scales[kModel1Tiles] = 0;
  std::memcpy(data + kModel1NopeDims, latent_bf16 + kModel1NopeDims, kModel1RopeDims * 2);
}

void model1_unpack_token(const uint8_t* page, int64_t tokens_per_page, int64_t t, uint16_t* latent_bf16) {
  const uint8_t* data = page + t * kModel1DataBytes;
  const uint8_t* scales = page + tokens_per_page * kModel1DataBytes + t * 8;
  for (int tile = 0; tile < kModel1Tiles; ++tile)
    for (int i = 0; i < kModel1TileDims; ++i) {
      const int d = tile * kModel1TileDims + i;
      latent_bf16[d] = double_to_bf16(std::ldexp(double{fp8_e4m3_to_float(data[d])}, scales[tile] - 127));
    }
  std::memcpy(latent_bf16 + kModel1NopeDims, data + kModel1NopeDims, kModel1RopeDims * 2);
}

}  // namespace dsv4h::reference
