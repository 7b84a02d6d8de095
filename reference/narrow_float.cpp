#include "narrow_float.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>

namespace dsv4h::reference {
namespace {

// The magnitudes of the fp8 codes 0..0x7e in order, and for 0x7f the value its exponent and
// mantissa would have (480): rounding to the nearest entry, ties to the even code, then yields
// 0x7f (NaN) exactly for the magnitudes that round above 448.
std::array<double, 128> fp8_magnitudes() {
  std::array<double, 128> values{};
  for (int code = 0; code < 128; ++code) {
    const int exponent = code >> 3, mantissa = code & 7;
    values[code] = exponent == 0 ? std::ldexp(mantissa, -9) : std::ldexp(8 + mantissa, exponent - 10);
  }
  return values;
}

}  // namespace

float bf16_to_float(uint16_t bits) {
  const uint32_t word = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &word, 4);
  return value;
}

uint16_t double_to_bf16(double value) {
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0;
  if (std::isnan(value)) return sign | 0x7fc0;
  const double magnitude = std::fabs(value);
  double rounded = magnitude;
  if (std::isfinite(magnitude) && magnitude > 0) {
    // 8 significant bits; below 2^-126 the spacing stays that of the lowest binade (subnormals).
    const double spacing = std::ldexp(1.0, std::max(std::ilogb(magnitude), -126) - 7);
    rounded = std::nearbyint(magnitude / spacing) * spacing;  // the default mode: half to even
  }
  if (rounded > std::numeric_limits<float>::max()) return sign | 0x7f80;  // rounds to 2^128: inf
  const float narrowed = static_cast<float>(rounded);  // exact: a bf16 value
  uint32_t word;
  std::memcpy(&word, &narrowed, 4);
  return sign | static_cast<uint16_t>(word >> 16);
}

float fp8_e4m3_to_float(uint8_t bits) {
  static const std::array<double, 128> magnitudes = fp8_magnitudes();
  if ((bits & 0x7f) == 0x7f) return std::copysign(NAN, (bits & 0x80) ? -1.f : 1.f);
  return static_cast<float>((bits & 0x80) ? -magnitudes[bits & 0x7f] : magnitudes[bits & 0x7f]);
}

uint8_t double_to_fp8_e4m3(double value) {
  static const std::array<double, 128> magnitudes = fp8_magnitudes();
  if (std::isnan(value)) return 0x7f;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0;
  const double magnitude = std::fabs(value);
  // The first code whose magnitude is >= this one (a lower bound in the table): the value's own
  // binade and top three mantissa bits name the code at or just below it (truncation), and the
  // table steps it up. A binary search of the table for every value was a third of the time of
  // making sparse attention's fp8 pools (2026-12-06).
  int code = 127;
  if (magnitude < 512) {
    uint64_t bits;
    std::memcpy(&bits, &magnitude, 8);
    const int binade = static_cast<int>(bits >> 52) - 1023;
    code = binade >= -6 ? std::min(127, (binade + 7) << 3 | static_cast<int>(bits >> 49 & 7))
                        : static_cast<int>(magnitude * 512);  // the subnormal codes, 2^-9 apart
  }
  while (code < 128 && magnitudes[code] < magnitude) ++code;
  if (code == 128) return sign | 0x7f;
  if (code > 0) {
    const double to_above = magnitudes[code] - magnitude, to_below = magnitude - magnitudes[code - 1];
    if (to_below < to_above || (to_below == to_above && (code & 1))) --code;
  }
  return sign | static_cast<uint8_t>(code);
}

}  // namespace dsv4h::reference
