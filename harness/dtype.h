// Element types the harness moves between host, device and JSON, and exact conversions for the
// narrow float formats (bf16, fp8 e4m3fn) so that host code never depends on a vendor type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace dsv4h {

enum class DType { f32, bf16, fp8_e4m3, i32, i64, u8 };

std::string dtype_name(DType dtype);
DType dtype_from_name(const std::string& name);  // throws std::invalid_argument naming the value
size_t dtype_size(DType dtype);
bool dtype_is_float(DType dtype);

// bf16: the upper half of an IEEE binary32. Rounding is to nearest even; NaN stays NaN.
float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float value);

// fp8 e4m3fn (OCP): bias 7, no infinities, 0x7f/0xff are NaN, largest finite 448.
// Rounding is to nearest even; magnitudes that round above 448 become NaN, as in PyTorch's cast.
float fp8_e4m3_to_float(uint8_t bits);
uint8_t float_to_fp8_e4m3(float value);

// Distance between the bf16 values adjacent to |value| (the value's unit in the last place).
double bf16_ulp(double value);

}  // namespace dsv4h
