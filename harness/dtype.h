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

// bf16: the upper half of an IEEE binary32. Rounding is to nearest even; NaN stays NaN; magnitudes
// that round beyond the largest finite become infinite. double_to_bf16 rounds once, straight from
// the double: through float it would round twice (207.4999998 -> 207.5f -> 208, not 207).
float bf16_to_float(uint16_t bits);
uint16_t float_to_bf16(float value);
uint16_t double_to_bf16(double value);

// fp8 e4m3fn (OCP): bias 7, no infinities, 0x7f/0xff are NaN, largest finite 448.
// Rounding is to nearest even, once, from the double (a float converts exactly); magnitudes that
// round above 448 become NaN, as in PyTorch's cast.
float fp8_e4m3_to_float(uint8_t bits);
uint8_t double_to_fp8_e4m3(double value);

// Distance between the values of a float dtype adjacent to |value| (the value's unit in the last
// place); the subnormal spacing below the smallest normal and for infinities and NaN.
double dtype_ulp(DType dtype, double value);
double bf16_ulp(double value);  // dtype_ulp(DType::bf16, value)

}  // namespace dsv4h
