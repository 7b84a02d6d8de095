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

namespace {

// Both narrow formats hold, per binade, an integer significand of `precision` bits times the binade's
// spacing; subnormals share the lowest binade's spacing. The significand rounds to nearest even in one
// step (scaling a double by a power of two is exact, and nearbyint rounds half to even in the default
// FP mode); a carry to 2^precision moves to the next binade.
struct Rounded {
  int64_t steps;  // significand in units of 2^(exponent - precision + 1); < 2^(precision-1): subnormal
  int exponent;   // may exceed the format's range: the caller overflows
};

Rounded round_significand(double magnitude, int precision, int min_exponent) {
  int exponent = std::max(std::ilogb(magnitude), min_exponent);
  double steps = std::nearbyint(std::ldexp(magnitude, precision - 1 - exponent));
  if (steps >= std::ldexp(1.0, precision)) { steps /= 2; ++exponent; }
  return {static_cast<int64_t>(steps), exponent};
}

}  // namespace

uint16_t double_to_bf16(double value) {
  const uint16_t sign = std::signbit(value) ? 0x8000 : 0x0000;
  if (std::isnan(value)) return sign | 0x7fc0;  // the quiet NaN float_to_bf16 makes of a float NaN
  const double magnitude = std::fabs(value);
  if (magnitude == 0.0) return sign;
  if (std::isinf(magnitude)) return sign | 0x7f80;
  const Rounded r = round_significand(magnitude, 8, -126);
  if (r.exponent > 127) return sign | 0x7f80;
  if (r.steps < 128) return sign | static_cast<uint16_t>(r.steps);  // subnormal (exponent field 0)
  return sign | static_cast<uint16_t>(((r.exponent + 127) << 7) | (r.steps - 128));
}

uint8_t double_to_fp8_e4m3(double value) {
  if (std::isnan(value)) return 0x7f;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  const double magnitude = std::fabs(value);
  if (magnitude == 0.0) return sign;
  if (std::isinf(magnitude)) return sign | 0x7f;  // e4m3fn has no infinity: beyond 448 is NaN
  const Rounded r = round_significand(magnitude, 4, -6);
  if (std::ldexp(static_cast<double>(r.steps), r.exponent - 3) > 448.0) return sign | 0x7f;
  if (r.steps < 8) return sign | static_cast<uint8_t>(r.steps);  // subnormal (exponent field 0)
  return sign | static_cast<uint8_t>(((r.exponent + 7) << 3) | (r.steps - 8));
}

double dtype_ulp(DType dtype, double value) {
  int precision = 0, min_exponent = 0;
  switch (dtype) {
    case DType::f32: precision = 24, min_exponent = -126; break;
    case DType::bf16: precision = 8, min_exponent = -126; break;
    case DType::fp8_e4m3: precision = 4, min_exponent = -6; break;
    default: throw std::logic_error("no ulp for " + dtype_name(dtype) + ": not a float dtype");
  }
  const double magnitude = std::fabs(value);
  const int exponent = std::isfinite(magnitude) && magnitude > 0 ? std::max(std::ilogb(magnitude), min_exponent)
                                                                 : min_exponent;
  return std::ldexp(1.0, exponent - precision + 1);
}

double bf16_ulp(double value) { return dtype_ulp(DType::bf16, value); }

}  // namespace dsv4h
