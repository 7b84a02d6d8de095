// The tolerance policy: one table of classes, each with its formula and the reason for it, and the
// default class of an output's dtype. Tests never state a literal tolerance; they get it from here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dtype.h"

namespace dsv4h {

struct OutputCheck;  // output_check.h: a class, a comparator and the accumulation length K

enum class ToleranceClass {
  exact,
  bf16_rounded_once,
  fp32_rounded_once,
  fp32_accumulated,
  fp8_quantised,
  fp32_lse,
  fp32_over_bf16_stage,
};

struct ToleranceSpec {
  ToleranceClass id;
  std::string name;
  std::string formula;       // the allowed |got - expected| per element, and per row under row_rel_l2
  std::string reason;
  std::string distribution;  // the bounds on the whole output's errors (DistributionBound), and why
};

const std::vector<ToleranceSpec>& tolerance_table();
const ToleranceSpec& tolerance_spec(ToleranceClass id);

// The class an output of this dtype is compared under unless its descriptor names another.
ToleranceClass tolerance_for(DType dtype);

// Allowed |got - expected| for one element whose expected value is `expected`.
double allowed_error(const OutputCheck& check, double expected);

// Allowed ||got - expected|| / ||expected|| of one row (row_rel_l2).
double allowed_row_rel_l2(const OutputCheck& check);

// What a correct kernel's errors look like over a whole float output, beside each element's bound:
// at least `min_exact_rate` of the compared elements equal to the reference, and the mean signed
// error within +-`max_mean_ulps`. A bias that keeps every element within its bound breaks these.
// Not applied below `min_elements` compared elements, where a few ties would decide it.
struct DistributionBound {
  double min_exact_rate = 0;
  double max_mean_ulps = 0;
  int64_t min_elements = 0;
};
DistributionBound distribution_bound(const OutputCheck& check);

// The ulp the mean signed error counts in, for an element whose scale is `scale` (its expected
// value; its row's RMS under row_rel_l2): the ulp of the precision the class rounds to (bf16's for
// bf16_rounded_once, e4m3's for fp8_quantised, also where an f32 output holds those values), else
// the dtype's; for fp32_lse at max(|scale|, 1).
double distribution_ulp(const OutputCheck& check, DType dtype, double scale);

}  // namespace dsv4h
