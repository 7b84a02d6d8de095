// compare_output's float path takes a shortcut for elements with equal bits (harness/compare.cpp
// says why); every field of its result, the floating sums bit for bit, must stay what the obvious
// per-element loop below gives, on any mix of equal, differing, unwritten, NaN and infinite
// elements, for each float dtype and each comparator and tolerance class.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <random>

#include "harness/compare.h"

namespace dsv4h {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// The semantics of compare_output for float outputs (elementwise and row_rel_l2), element by
// element in index order, the worst mismatches kept as the 8 of largest error / allowed.
OutputComparison obvious_comparison(const HostTensor& expected, Poison expected_poison, const HostTensor& got,
                                    Poison got_poison, const OutputCheck& check, const HostTensor* magnitudes) {
  OutputComparison r;
  r.output = "out";
  r.dtype = dtype_name(got.dtype());
  r.tolerance = tolerance_spec(check.tolerance).name;
  r.comparator = comparator_name(check.comparator);
  r.elements = got.numel();
  const bool by_row = check.comparator == Comparator::row_rel_l2;
  const int64_t rows = got.shape()[0], row_size = r.elements / rows;
  std::vector<double> row_diff_sq(rows), row_exp_sq(rows), row_magnitude_sq(rows), row_signed_error(rows);
  std::vector<int64_t> row_count(rows);
  std::vector<ElementMismatch> mismatches;
  double diff_sq = 0, exp_sq = 0, got_sq = 0, dot = 0, signed_error_ulps = 0;
  int64_t exact_agreements = 0;
  for (int64_t i = 0; i < r.elements; ++i) {
    const bool exp_unwritten = expected.bits(i) == poison_bits(got.dtype(), expected_poison);
    const bool got_unwritten = got.bits(i) == poison_bits(got.dtype(), got_poison);
    if (exp_unwritten && got_unwritten) {
      ++r.unwritten;
      continue;
    }
    const double e = expected.get(i), g = got.get(i);
    if (exp_unwritten || got_unwritten) {
      ++r.write_mismatches;
      mismatches.push_back({i, expected.index_string(i), exp_unwritten ? "(unwritten)" : format_value(e),
                            got_unwritten ? "(unwritten)" : format_value(g), kInf, 0});
      continue;
    }
    ++r.compared;
    r.nan_expected += std::isnan(e);
    r.nan_got += std::isnan(g);
    r.inf_got += std::isinf(g);
    const bool finite = std::isfinite(e) && std::isfinite(g);
    double error = 0, allowed = 0;
    if (check.tolerance == ToleranceClass::exact) {
      if (expected.bits(i) != got.bits(i))
        error = std::isnan(e - g) ? kInf : std::max(std::fabs(e - g), std::numeric_limits<double>::min());
    } else if (!finite) {
      if (!(std::isnan(e) && std::isnan(g)) && e != g) error = kInf;
    } else {
      error = std::fabs(e - g);
      allowed = by_row ? kInf : allowed_error(check, e);
      diff_sq += error * error;
      exp_sq += e * e;
      got_sq += g * g;
      dot += e * g;
      if (e != 0) r.max_rel_error = std::max(r.max_rel_error, error / std::fabs(e));
    }
    if (finite) {
      ++r.distribution_elements;
      exact_agreements += e == g;
      const int64_t row = i / row_size;
      if (by_row) {
        row_diff_sq[row] += error * error;
        row_exp_sq[row] += e * e;
        row_signed_error[row] += g - e;
        ++row_count[row];
        if (magnitudes) row_magnitude_sq[row] += magnitudes->get(i) * magnitudes->get(i);
      } else {
        signed_error_ulps += (g - e) / distribution_ulp(check, got.dtype(), e);
      }
    }
    if (std::isfinite(error)) r.max_abs_error = std::max(r.max_abs_error, error);
    if (std::isfinite(allowed)) r.budget_used = std::max(r.budget_used, allowed > 0 ? error / allowed : error > 0 ? kInf : 0);
    if (error > allowed) {
      ++r.value_mismatches;
      mismatches.push_back({i, expected.index_string(i), format_value(e), format_value(g), error, allowed});
    }
  }
  if (by_row) {
    const double allowed = allowed_row_rel_l2(check);
    for (int64_t row = 0; row < rows; ++row) {
      if (row_count[row] == 0) continue;
      const double rms = std::sqrt(row_exp_sq[row] / static_cast<double>(row_count[row]));
      signed_error_ulps += row_signed_error[row] / distribution_ulp(check, got.dtype(), rms);
      const double norm_sq = std::max(row_exp_sq[row], row_magnitude_sq[row]);
      const double rel = norm_sq > 0 ? std::sqrt(row_diff_sq[row] / norm_sq) : (row_diff_sq[row] > 0 ? kInf : 0);
      r.budget_used = std::max(r.budget_used, allowed > 0 ? rel / allowed : rel > 0 ? kInf : 0);
      if (rel > allowed) {
        ++r.value_mismatches;
        std::string index = "[" + std::to_string(row);
        for (size_t d = 1; d < got.shape().size(); ++d) index += ", :";
        mismatches.push_back({row * row_size, index + "]", "row L2 " + format_value(std::sqrt(row_exp_sq[row])),
                              "error L2 " + format_value(std::sqrt(row_diff_sq[row])), rel, allowed});
      }
    }
  }
  const auto ratio = [](const ElementMismatch& m) { return m.allowed > 0 ? m.error / m.allowed : kInf; };
  std::stable_sort(mismatches.begin(), mismatches.end(),
                   [&](const ElementMismatch& a, const ElementMismatch& b) { return ratio(a) > ratio(b); });
  mismatches.resize(std::min<size_t>(mismatches.size(), 8));
  r.worst = mismatches;
  r.rel_l2_error = exp_sq > 0 ? std::sqrt(diff_sq / exp_sq) : std::sqrt(diff_sq);
  r.cosine = (exp_sq > 0 && got_sq > 0) ? dot / std::sqrt(exp_sq * got_sq) : (exp_sq == got_sq ? 1 : 0);
  r.distribution_bound = distribution_bound(check);
  if (r.distribution_elements > 0) {
    r.exact_agreement_rate = static_cast<double>(exact_agreements) / static_cast<double>(r.distribution_elements);
    r.mean_signed_error_ulps = signed_error_ulps / static_cast<double>(r.distribution_elements);
  }
  r.distribution_checked = r.distribution_elements >= r.distribution_bound.min_elements;
  r.distribution_passed = !r.distribution_checked ||
                          (r.exact_agreement_rate >= r.distribution_bound.min_exact_rate &&
                           std::fabs(r.mean_signed_error_ulps) <= r.distribution_bound.max_mean_ulps);
  return r;
}

uint64_t bits_of(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

#define RC_ASSERT_SAME_DOUBLE(a, b) RC_ASSERT(bits_of(a) == bits_of(b))

void assert_same(const OutputComparison& a, const OutputComparison& b) {
  RC_ASSERT(a.output == b.output && a.dtype == b.dtype && a.tolerance == b.tolerance && a.comparator == b.comparator);
  RC_ASSERT(a.elements == b.elements);
  RC_ASSERT(a.compared == b.compared);
  RC_ASSERT(a.unwritten == b.unwritten);
  RC_ASSERT(a.write_mismatches == b.write_mismatches);
  RC_ASSERT(a.value_mismatches == b.value_mismatches);
  RC_ASSERT(a.tied_swaps == b.tied_swaps);
  RC_ASSERT(a.nan_expected == b.nan_expected && a.nan_got == b.nan_got && a.inf_got == b.inf_got);
  RC_ASSERT_SAME_DOUBLE(a.max_abs_error, b.max_abs_error);
  RC_ASSERT_SAME_DOUBLE(a.max_rel_error, b.max_rel_error);
  RC_ASSERT_SAME_DOUBLE(a.rel_l2_error, b.rel_l2_error);
  RC_ASSERT_SAME_DOUBLE(a.cosine, b.cosine);
  RC_ASSERT_SAME_DOUBLE(a.budget_used, b.budget_used);
  RC_ASSERT(a.distribution_elements == b.distribution_elements);
  RC_ASSERT_SAME_DOUBLE(a.exact_agreement_rate, b.exact_agreement_rate);
  RC_ASSERT_SAME_DOUBLE(a.mean_signed_error_ulps, b.mean_signed_error_ulps);
  RC_ASSERT_SAME_DOUBLE(a.distribution_bound.min_exact_rate, b.distribution_bound.min_exact_rate);
  RC_ASSERT_SAME_DOUBLE(a.distribution_bound.max_mean_ulps, b.distribution_bound.max_mean_ulps);
  RC_ASSERT(a.distribution_bound.min_elements == b.distribution_bound.min_elements);
  RC_ASSERT(a.distribution_checked == b.distribution_checked && a.distribution_passed == b.distribution_passed);
  RC_ASSERT(a.worst.size() == b.worst.size());
  for (size_t k = 0; k < a.worst.size(); ++k) {
    RC_ASSERT(a.worst[k].flat == b.worst[k].flat);
    RC_ASSERT(a.worst[k].index == b.worst[k].index);
    RC_ASSERT(a.worst[k].expected == b.worst[k].expected && a.worst[k].got == b.worst[k].got);
    RC_ASSERT_SAME_DOUBLE(a.worst[k].error, b.worst[k].error);
    RC_ASSERT_SAME_DOUBLE(a.worst[k].allowed, b.worst[k].allowed);
  }
}

// Each class under each comparator it serves, with and without the row magnitudes; the last two
// have no per-element bound, and compare_output must throw for them as the obvious loop does.
const std::vector<OutputCheck>& checks() {
  using T = ToleranceClass;
  using C = Comparator;
  static const std::vector<OutputCheck> all = {
      {T::exact, C::elementwise, 0, ""},
      {T::bf16_rounded_once, C::elementwise, 0, ""},
      {T::fp32_rounded_once, C::elementwise, 0, ""},
      {T::fp8_quantised, C::elementwise, 0, ""},
      {T::fp32_accumulated, C::elementwise, 64, ""},
      {T::fp32_lse, C::elementwise, 64, ""},
      {T::exact, C::row_rel_l2, 0, ""},
      {T::bf16_rounded_once, C::row_rel_l2, 0, ""},
      {T::fp32_accumulated, C::row_rel_l2, 64, ""},
      {T::fp32_accumulated, C::row_rel_l2, 64, "magnitudes"},
      {T::fp32_over_bf16_stage, C::row_rel_l2, 64, "magnitudes"},
      {T::fp32_over_bf16_stage, C::elementwise, 64, ""},
      {T::fp32_accumulated, C::elementwise, 0, ""},
  };
  return all;
}

// A pair of tensors where most elements are equal (the shortcut's case) and the rest is each kind
// of element the general comparison handles.
struct Pair {
  HostTensor expected, got;
};

Pair random_pair(DType dtype, int64_t rows, int64_t cols, Poison expected_poison, Poison got_poison,
                 double equal_share, uint64_t seed) {
  Pair p{HostTensor(dtype, {rows, cols}), HostTensor(dtype, {rows, cols})};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0, 1);
  std::normal_distribution<double> normal(0, 1);
  const double scale = std::pow(10.0, std::uniform_int_distribution<int>(-3, 2)(rng));
  const uint64_t word_mask = (uint64_t{1} << (8 * dtype_size(dtype))) - 1;
  for (int64_t i = 0; i < rows * cols; ++i) {
    const double v = normal(rng) * scale;
    p.expected.set(i, v), p.got.set(i, v);
    if (unit(rng) < equal_share) continue;
    switch (std::uniform_int_distribution<int>(0, 10)(rng)) {
      case 0: p.got.set_bits(i, (p.got.bits(i) + 1) & word_mask); break;  // the next word: 1 ulp, or into NaN/inf
      case 1: p.got.set_bits(i, (p.got.bits(i) - 1) & word_mask); break;
      case 2: p.got.set(i, v * (1 + 1e-3)); break;
      case 3: p.got.set(i, normal(rng) * scale); break;
      case 4: p.got.set_bits(i, rng() & word_mask); break;  // any word, poison and NaN included
      case 5: p.expected.set_bits(i, poison_bits(dtype, expected_poison)); break;
      case 6: p.got.set_bits(i, poison_bits(dtype, got_poison)); break;
      case 7:
        p.expected.set_bits(i, poison_bits(dtype, expected_poison));
        p.got.set_bits(i, poison_bits(dtype, got_poison));
        break;
      case 8: (unit(rng) < 0.5 ? p.got : p.expected).set(i, NAN); break;
      case 9: p.expected.set(i, INFINITY), p.got.set(i, unit(rng) < 0.5 ? INFINITY : -INFINITY); break;
      case 10: p.expected.set(i, 0.0), p.got.set(i, unit(rng) < 0.5 ? -0.0 : 0.0); break;
    }
  }
  return p;
}

std::optional<std::string> thrown_by(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::logic_error& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

RC_GTEST_PROP(CompareProperty, FloatPathEqualsTheObviousLoop, ()) {
  const DType dtype = std::vector<DType>{DType::f32, DType::bf16, DType::fp8_e4m3}[*rc::gen::inRange(0, 3)];
  const size_t check_index = *rc::gen::inRange<size_t>(0, checks().size());
  const OutputCheck& check = checks()[check_index];
  const int64_t rows = *rc::gen::inRange<int64_t>(1, 7), cols = *rc::gen::inRange<int64_t>(1, 65);
  const Poison expected_poison = *rc::gen::arbitrary<bool>() ? Poison::a : Poison::b;
  const Poison got_poison = *rc::gen::arbitrary<bool>() ? Poison::a : Poison::b;
  const double equal_share = *rc::gen::element(0.0, 0.5, 0.9, 0.99, 1.0);
  const uint64_t seed = *rc::gen::inRange<uint64_t>(0, 1u << 30);
  RC_LOG() << dtype_name(dtype) << " [" << rows << ", " << cols << "], check " << check_index << " ("
           << tolerance_spec(check.tolerance).name << ", " << comparator_name(check.comparator) << ")\n";
  const Pair p = random_pair(dtype, rows, cols, expected_poison, got_poison, equal_share, seed);
  // Sums of term magnitudes: smaller than the row's norm or far beyond it.
  TensorMap reference_tensors = {{"magnitudes", HostTensor(DType::f32, {rows, cols})}};
  std::mt19937_64 rng(seed + 1);
  std::exponential_distribution<double> magnitude(*rc::gen::element(0.1, 1e-3));
  for (int64_t i = 0; i < rows * cols; ++i) reference_tensors.at("magnitudes").set(i, magnitude(rng));
  const HostTensor* magnitudes = check.scores.empty() ? nullptr : &reference_tensors.at("magnitudes");

  OutputComparison fast, obvious;
  const auto fast_threw = thrown_by([&] {
    fast = compare_output("out", p.expected, expected_poison, p.got, got_poison, check, &reference_tensors);
  });
  const auto obvious_threw = thrown_by(
      [&] { obvious = obvious_comparison(p.expected, expected_poison, p.got, got_poison, check, magnitudes); });
  RC_ASSERT(fast_threw == obvious_threw);
  if (!fast_threw) assert_same(fast, obvious);
}

}  // namespace
}  // namespace dsv4h
