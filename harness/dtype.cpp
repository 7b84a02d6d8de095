#include "dtype.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

namespace dsv4h {

std::string dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::fp8_e4m3: return "fp8_e4m3";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::u8: return "u8";
  }
  throw std::logic_error("unknown dtype");
}

DType dtype_from_name(const std::string& name) {
  for (DType d : {DType::f32, DType::bf16, DType::fp8_e4m3, DType::i32, DType::i64, DType::u8})
    if (dtype_name(d) == name) return d;
  throw std::invalid_argument("unknown dtype \"" + name +
                              "\" (expected f32, bf16, fp8_e4m3, i32, i64 or u8)");
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: return 2;
    case DType::fp8_e4m3: case DType::u8: return 1;
    case DType::i64: return 8;
  }
  throw std::logic_error("unknown dtype");
}

bool dtype_is_float(DType dtype) {
  return dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::fp8_e4m3;
}

float bf16_to_float(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_bf16(float value) {
  uint32_t u;
  std::memcpy(&u, &value, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float fp8_e4m3_to_float(uint8_t bits) {
  const float sign = (bits & 0x80) ? -1.f : 1.f;
  const int exponent = (bits >> 3) & 0xf;
  const int mantissa = bits & 0x7;
  if (exponent == 0xf && mantissa == 0x7) return std::nanf("");
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -9);  // subnormal: m * 2^-6 / 8
  return sign * std::ldexp(1.f + mantissa / 8.f, exponent - 7);
}

uint8_t float_to_fp8_e4m3(float value) {
  if (std::isnan(value)) return 0x7f;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  const double magnitude = std::fabs(static_cast<double>(value));
  // Every e4m3 magnitude is k * 2^-9 for an integer k on a grid whose spacing doubles per binade;
  // find the binade, round the scaled mantissa to nearest even, and renormalise on carry.
  if (magnitude == 0.0) return sign;
  if (std::isinf(magnitude)) return sign | 0x7f;  // e4m3fn has no infinity: beyond 448 is NaN
  int exponent = std::max(std::ilogb(magnitude), -6);  // -6: subnormals share the lowest binade's spacing
  const double spacing = std::ldexp(1.0, exponent - 3);
  double steps = std::nearbyint(magnitude / spacing);  // the default FP mode rounds half to even
  if (steps >= 16.0) { steps /= 2.0; ++exponent; }
  const double rounded = steps * std::ldexp(1.0, exponent - 3);
  if (rounded > 448.0) return sign | 0x7f;
  if (steps < 8.0) return sign | static_cast<uint8_t>(steps);  // subnormal (exponent field 0)
  return sign | static_cast<uint8_t>(((exponent + 7) << 3) | (static_cast<int>(steps) - 8));
}

double bf16_ulp(double value) {
  const double magnitude = std::fabs(value);
  const double min_normal = std::ldexp(1.0, -126);
  if (magnitude < min_normal || !std::isfinite(magnitude)) return std::ldexp(1.0, -133);
  return std::ldexp(1.0, std::ilogb(magnitude) - 7);
}

}  // namespace dsv4h
