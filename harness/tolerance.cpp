#include "tolerance.h"

#include <stdexcept>

namespace dsv4h {

const std::vector<ToleranceSpec>& tolerance_table() {
  static const std::vector<ToleranceSpec> table = {
      {ToleranceClass::exact, "exact", "0 (bit patterns equal)",
       "Integer outputs (indices, lengths, locations) and packed byte layouts (fp8 e4m3, u8) have "
       "one right answer; both sides use the same rounding rule, so any difference is a bug."},
      {ToleranceClass::bf16_rounded_once, "bf16_rounded_once", "1 * ulp_bf16(|expected|)",
       "The kernel computes each element in fp32 and rounds once to bf16; the reference computes "
       "in fp64 and rounds once. Each result is within 0.5 ulp of the exact value, so two correct "
       "results are equal or adjacent bf16 values: at most 1 ulp apart. A missing clamp exceeds "
       "it; a second rounding (silu(g) stored as bf16 before the multiply, spec 8.2's Triton path) "
       "does not: it moves the product by less than 1 ulp, so the two results are still adjacent."},
  };
  return table;
}

const ToleranceSpec& tolerance_spec(ToleranceClass id) {
  for (const ToleranceSpec& spec : tolerance_table())
    if (spec.id == id) return spec;
  throw std::logic_error("tolerance class missing from the table");
}

ToleranceClass tolerance_for(DType dtype) {
  switch (dtype) {
    case DType::bf16: return ToleranceClass::bf16_rounded_once;
    case DType::i32: case DType::i64: case DType::u8: case DType::fp8_e4m3: return ToleranceClass::exact;
    case DType::f32: break;
  }
  throw std::logic_error("no tolerance class for " + dtype_name(dtype) +
                         " outputs yet: add one to tolerance_table() with its derivation");
}

double allowed_error(ToleranceClass id, double expected) {
  switch (id) {
    case ToleranceClass::exact: return 0.0;
    case ToleranceClass::bf16_rounded_once: return bf16_ulp(expected);
  }
  throw std::logic_error("unknown tolerance class");
}

}  // namespace dsv4h
