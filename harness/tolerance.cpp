#include "tolerance.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "output_check.h"

namespace dsv4h {
namespace {

constexpr double kU32 = 0x1.0p-24;  // fp32 unit roundoff

// K of the classes whose bound grows with it; they cannot be checked without it.
double terms(const OutputCheck& check) {
  const double k = static_cast<double>(check.accumulated_terms);
  if (k < 1 || k * kU32 >= 0.5)
    throw std::logic_error(tolerance_spec(check.tolerance).name +
                           " needs accumulated_terms K with 1 <= K < 2^23, got " +
                           std::to_string(check.accumulated_terms));
  return k;
}

}  // namespace

const std::vector<ToleranceSpec>& tolerance_table() {
  static const std::vector<ToleranceSpec> table = {
      {ToleranceClass::exact, "exact", "0 (bit patterns equal)",
       "Integer outputs (indices, lengths, locations) and packed byte layouts (fp8 e4m3, u8) have "
       "one right answer; both sides use the same rounding rule, so any difference is a bug.",
       "Exact agreement 100%, mean signed error 0, from 1 element: what the per-element check implies."},
      {ToleranceClass::bf16_rounded_once, "bf16_rounded_once",
       "1 * ulp_bf16(|expected|); per row 2^-7 (an ulp is at most 2^-7 of its value)",
       "The kernel computes each element in fp32 and rounds once to bf16; the reference computes "
       "in fp64 and rounds once. Each result is within 0.5 ulp of the exact value, so two correct "
       "results are equal or adjacent bf16 values: at most 1 ulp apart. A missing clamp exceeds "
       "it; a second rounding (silu(g) stored as bf16 before the multiply, spec 8.2's Triton path) "
       "does not: it moves the product by less than 1 ulp, so the two results are still adjacent.",
       "Exact agreement >= 90% and |mean signed error| <= 0.05 ulp, from 256 elements. Two correct "
       "results differ only where the exact value lies within the kernel's fp32 error of a rounding "
       "midpoint: that error is under 2^-10 bf16 ulp (filtered_silu_mul's fast exp: ~50 fp32 ulp, "
       "each 2^-16 bf16 ulp), so for values spread over the ulp at most 2^-9 (0.2%) of the elements "
       "differ, by 1 ulp either way, and the mean signed error is within 2^-9 ulp. The bounds leave "
       "50 and 25 times that for inputs that repeat a few values (the adversarial ones). A directed "
       "rounding (toward +inf, toward zero) differs from the nearest for half the values the format "
       "does not hold: agreement near 50%, and toward +-inf a mean near +-0.5 ulp, whose standard "
       "error at 256 elements is 0.02 ulp."},
      {ToleranceClass::fp32_rounded_once, "fp32_rounded_once",
       "1 * ulp_f32(|expected|); per row 2^-23",
       "An f32 output that is one IEEE operation on exact values (a product or sum of two bf16s, a "
       "scale by a power of two, a conversion) or is computed in wider precision and rounded once: "
       "both sides are within 0.5 ulp of the exact value, so at most 1 ulp apart (also where the "
       "kernel rounds faithfully). Longer fp32 computations are fp32_accumulated.",
       "As bf16_rounded_once (>= 90%, <= 0.05 ulp, from 256 elements): the kernel's error before its "
       "one rounding is a small fraction of an ulp, and both sides then round to nearest alike."},
      {ToleranceClass::fp32_accumulated, "fp32_accumulated",
       "gamma_K * |expected| + ulp_f32(expected), gamma_K = K u / (1 - K u), u = 2^-24; "
       "per row (4 sqrt(K) + 1) u",
       "An fp32 sum of K terms (a dot product of length K, its products exact in fp32) in any order: "
       "|computed - exact| <= gamma_K sum |t_i| (Higham, Accuracy and Stability, 3.1), plus one ulp "
       "for the reference's own rounding to f32. Only the expected value is known, so elementwise "
       "takes sum |t_i| = |expected|, true where the terms share a sign (sums of squares, of "
       "exponentials, of weights). Where terms cancel, compare per row (row_rel_l2): with rounding "
       "errors independent and of mean zero (Higham and Mary, SISC 2019) a sum's error is a random "
       "walk over its partial sums, whose RMS relative to the row's RMS is sqrt(K/9) u for terms of "
       "one sign (partial sums grow linearly) and sqrt(K/6) u for zero-mean terms (they grow as "
       "sqrt(j)); 4 sqrt(K) u is 10 times that, plus u for the reference's rounding.",
       "Exact agreement not bounded (any summation order is right, and most sums then differ in the "
       "last bits); |mean signed error| <= sqrt(K)/4 ulp (of the row's RMS under row_rel_l2), from "
       "256 elements. Rounding to nearest is unbiased: each element's error has mean zero and an "
       "RMS of at most sqrt(K)/2.5 ulp (above), so the mean of 256 independent ones has an RMS of "
       "at most sqrt(K)/40 ulp: the bound is 10 times that. A directed rounding in the accumulation "
       "moves every partial sum the same way, about K/4 ulp of the result: beyond it for K >= 2."},
      {ToleranceClass::fp8_quantised, "fp8_quantised",
       "1 * ulp_e4m3(|expected|); per row 2^-3",
       "Entries quantised to e4m3 (after a scale): the kernel computes the value to quantise in "
       "fp32, the reference exactly, and both round it once to nearest even. They agree except "
       "where the value lies within the fp32 error of a rounding midpoint, and are then adjacent "
       "codes: 1 ulp. Where both sides quantise the same exactly known value (a bf16 times a power "
       "of two, as the KV pool's stores) the output is exact instead.",
       "As bf16_rounded_once (>= 90%, <= 0.05 ulp, from 256 elements): the fp32 error before the "
       "rounding is about 2^-20 of an e4m3 ulp."},
      {ToleranceClass::fp32_lse, "fp32_lse",
       "(2 K + 4) u + ulp_f32(expected), u = 2^-24 (absolute)",
       "log(sum exp(x_i)) over K terms in fp32, as m + log(S) with m = max x_i and S = sum "
       "exp(x_i - m) in [1, K]. Rounding x_i - m (t = m - x_i >= 0) moves exp(-t) by t u e^-t <= "
       "u/e absolutely; expf's 2 ulp add 4u relative; the sum adds gamma_(K-1) S. As S >= 1, S's "
       "relative error is at most (K/e + K + 4) u, and log turns it into that absolute error; log's "
       "own rounding adds u log K <= (K/e) u; the final addition one ulp of the result.",
       "Exact agreement not bounded; |mean signed error| <= sqrt(K)/4 + 2 ulp of max(|expected|, 1), "
       "from 256 elements. The sum's rounding errors have mean zero and an RMS of at most sqrt(K/9) "
       "u S, i.e. sqrt(K/9) u in the result, sqrt(K)/6 ulp of a value >= 1: over 256 elements the "
       "mean's RMS is sqrt(K)/96 ulp, well inside sqrt(K)/4. exp and log may be biased within their "
       "own accuracy: 4u, 2 ulp of 1."},
      {ToleranceClass::fp32_over_bf16_stage, "fp32_over_bf16_stage",
       "per row (row_rel_l2 only) 2^-7 + (4 sqrt(K) + 1) u, u = 2^-24",
       "An fp32 output linear in a bf16 tensor that an earlier kernel of the same run stored (the "
       "MoE's GEMM2 and combine over the activation, K terms accumulated from it in all), where the "
       "reference rounds that tensor at the same point from its own fp64 values. The two stored "
       "tensors then agree except where the kernel's value before the rounding fell on the other "
       "side of a rounding point: each differing element by about an ulp, at most 2^-7 of its value, "
       "so at most 2^-7 of a row's norm in all (the stored tensor's own check, bf16_rounded_once per "
       "row, holds that). A linear map with weights drawn independently of where the roundings "
       "differ passes a row's relative error on unchanged in RMS (E||W d||^2 / E||W a||^2 = "
       "||d||^2 / ||a||^2 for i.i.d. zero-mean weights); a routed weight or a scale multiplies both "
       "sides alike. The map's own fp32 sums add fp32_accumulated's row bound, (4 sqrt(K) + 1) u. "
       "No per-element bound: an output near zero takes the absolute error of its row.",
       "Exact agreement not bounded; |mean signed error| <= 2^16 ulp of the row's RMS, from 256 "
       "elements. An element's error is a weighted sum of independent rounding differences of either "
       "sign, with an RMS of at most 2^-7 of the row's RMS (above): the mean of 256 has an RMS of at "
       "most 2^-11 of it, at most 2^13 fp32 ulps (an ulp is at least 2^-24 of its value), and the "
       "bound is 8 times that: a bias of a few bf16 ulps in every element shows, the rest is the "
       "row bound's."},
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
    case DType::f32: return ToleranceClass::fp32_rounded_once;
    case DType::i32: case DType::i64: case DType::u8: case DType::fp8_e4m3: return ToleranceClass::exact;
  }
  throw std::logic_error("unknown dtype");
}

double allowed_error(const OutputCheck& check, double expected) {
  switch (check.tolerance) {
    case ToleranceClass::exact: return 0.0;
    case ToleranceClass::bf16_rounded_once: return dtype_ulp(DType::bf16, expected);
    case ToleranceClass::fp32_rounded_once: return dtype_ulp(DType::f32, expected);
    case ToleranceClass::fp8_quantised: return dtype_ulp(DType::fp8_e4m3, expected);
    case ToleranceClass::fp32_accumulated: {
      const double k = terms(check);
      return k * kU32 / (1 - k * kU32) * std::fabs(expected) + dtype_ulp(DType::f32, expected);
    }
    case ToleranceClass::fp32_lse: return (2 * terms(check) + 4) * kU32 + dtype_ulp(DType::f32, expected);
    case ToleranceClass::fp32_over_bf16_stage: break;
  }
  throw std::logic_error(tolerance_spec(check.tolerance).name + " bounds rows (row_rel_l2): it has no per-element bound");
}

double allowed_row_rel_l2(const OutputCheck& check) {
  switch (check.tolerance) {
    case ToleranceClass::exact: return 0.0;
    case ToleranceClass::bf16_rounded_once: return 0x1.0p-7;
    case ToleranceClass::fp32_rounded_once: return 0x1.0p-23;
    case ToleranceClass::fp8_quantised: return 0x1.0p-3;
    case ToleranceClass::fp32_accumulated: return (4 * std::sqrt(terms(check)) + 1) * kU32;
    case ToleranceClass::fp32_over_bf16_stage: return 0x1.0p-7 + (4 * std::sqrt(terms(check)) + 1) * kU32;
    case ToleranceClass::fp32_lse: break;
  }
  throw std::logic_error(tolerance_spec(check.tolerance).name +
                         " bounds absolute errors: it has no per-row relative bound");
}

DistributionBound distribution_bound(const OutputCheck& check) {
  switch (check.tolerance) {
    case ToleranceClass::exact: return {1.0, 0.0, 1};
    case ToleranceClass::bf16_rounded_once: case ToleranceClass::fp32_rounded_once:
    case ToleranceClass::fp8_quantised: return {0.9, 0.05, 256};
    case ToleranceClass::fp32_accumulated: return {0.0, std::sqrt(terms(check)) / 4, 256};
    case ToleranceClass::fp32_lse: return {0.0, std::sqrt(terms(check)) / 4 + 2, 256};
    case ToleranceClass::fp32_over_bf16_stage: return {0.0, 0x1.0p16, 256};
  }
  throw std::logic_error("unknown tolerance class");
}

double distribution_ulp(const OutputCheck& check, DType dtype, double scale) {
  switch (check.tolerance) {
    case ToleranceClass::bf16_rounded_once: return dtype_ulp(DType::bf16, scale);
    case ToleranceClass::fp8_quantised: return dtype_ulp(DType::fp8_e4m3, scale);
    case ToleranceClass::fp32_lse: return dtype_ulp(dtype, std::max(std::fabs(scale), 1.0));
    default: return dtype_ulp(dtype, scale);
  }
}

}  // namespace dsv4h
