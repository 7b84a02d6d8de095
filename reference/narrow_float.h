// The narrow float conversions the pool's references need (bf16 keys and latents, fp8 e4m3fn
// codes), written apart from the harness's (harness/dtype.cpp) and another way: by value, not by
// bit manipulation. A reference that shared the harness's conversions would reproduce their bugs
// in the expected bytes; tests/cpu/test_narrow_float.cpp holds the two to the same results.
#pragma once

#include <cstdint>

namespace dsv4h::reference {

// bf16: the upper half of an IEEE binary32; rounding to nearest even, once, from the double (a
// reference computes in double: through float it would round twice), NaN a quiet NaN of its sign.
float bf16_to_float(uint16_t bits);
uint16_t double_to_bf16(double value);

// fp8 e4m3fn (OCP): no infinities, 0x7f/0xff are NaN, largest finite 448; rounding to nearest
// even, once, from the double; magnitudes that round above 448 and infinities become the NaN of
// their sign, NaN 0x7f.
float fp8_e4m3_to_float(uint8_t bits);
uint8_t double_to_fp8_e4m3(double value);

}  // namespace dsv4h::reference
