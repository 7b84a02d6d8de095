#include "compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <stdexcept>

namespace dsv4h {

std::string format_value(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.9g", value);
  return buf;
}

namespace {

constexpr size_t kWorstKept = 8;
constexpr double kInf = std::numeric_limits<double>::infinity();

// The share of its budget an error used; an error where none is allowed uses it all and more.
double budget_ratio(double error, double allowed) {
  return allowed > 0 ? error / allowed : (error > 0 ? kInf : 0);
}

void keep_worst(std::vector<ElementMismatch>& worst, ElementMismatch m) {
  worst.push_back(std::move(m));
  auto ratio = [](const ElementMismatch& e) { return e.allowed > 0 ? e.error / e.allowed : kInf; };
  std::stable_sort(worst.begin(), worst.end(),
                   [&](const ElementMismatch& x, const ElementMismatch& y) { return ratio(x) > ratio(y); });
  if (worst.size() > kWorstKept) worst.pop_back();
}

// Integer outputs (index arrays, pool words) are most of what the harness compares, nearly all of
// it equal: elements with equal bits, or unwritten on both sides, are counted here in one typed
// pass; the indices of the others are returned for the general path.
template <typename Word>
std::vector<int64_t> scan_words(const HostTensor& expected, uint64_t expected_poison, const HostTensor& got,
                                uint64_t got_poison, OutputComparison& r) {
  const Word* e = reinterpret_cast<const Word*>(expected.bytes());
  const Word* g = reinterpret_cast<const Word*>(got.bytes());
  const Word pe = static_cast<Word>(expected_poison), pg = static_cast<Word>(got_poison);
  std::vector<int64_t> others;
  for (int64_t i = 0; i < r.elements; ++i) {
    if (e[i] == pe && g[i] == pg) ++r.unwritten;
    else if (e[i] == g[i] && e[i] != pe && g[i] != pg) ++r.compared;
    else others.push_back(i);
  }
  return others;
}

std::vector<int64_t> integers_needing_a_look(const HostTensor& expected, Poison expected_poison, const HostTensor& got,
                                            Poison got_poison, OutputComparison& r) {
  const uint64_t pe = poison_bits(got.dtype(), expected_poison), pg = poison_bits(got.dtype(), got_poison);
  switch (dtype_size(got.dtype())) {
    case 1: return scan_words<uint8_t>(expected, pe, got, pg, r);
    case 2: return scan_words<uint16_t>(expected, pe, got, pg, r);
    case 4: return scan_words<uint32_t>(expected, pe, got, pg, r);
    default: return scan_words<uint64_t>(expected, pe, got, pg, r);
  }
}

// The value of a word of each float dtype (one per width), as HostTensor::get reads it.
float word_value(uint8_t word) { return fp8_e4m3_to_float(word); }
float word_value(uint16_t word) { return bf16_to_float(word); }
float word_value(uint32_t word) {
  float value;
  std::memcpy(&value, &word, sizeof(value));
  return value;
}

// Float outputs, in one typed pass in index order: an element unwritten on both sides is counted
// here; one with equal bits, written and finite (nearly every element: replay vs eager is bitwise,
// and most of a kernel's elements equal the reference's rounding) goes to equal_finite(i, value);
// every other to element(i), the general comparison.
template <typename Word, typename EqualFinite, typename Element>
void scan_float_words(const HostTensor& expected, uint64_t expected_poison, const HostTensor& got,
                      uint64_t got_poison, OutputComparison& r, EqualFinite&& equal_finite, Element&& element) {
  const Word* e = reinterpret_cast<const Word*>(expected.bytes());
  const Word* g = reinterpret_cast<const Word*>(got.bytes());
  const Word pe = static_cast<Word>(expected_poison), pg = static_cast<Word>(got_poison);
  for (int64_t i = 0; i < r.elements; ++i) {
    if (e[i] == pe && g[i] == pg) {
      ++r.unwritten;
      continue;
    }
    const float value = word_value(e[i]);
    if (e[i] == g[i] && e[i] != pe && g[i] != pg && std::isfinite(value)) equal_finite(i, value);
    else element(i);
  }
}

template <typename EqualFinite, typename Element>
void scan_floats(const HostTensor& expected, Poison expected_poison, const HostTensor& got, Poison got_poison,
                 OutputComparison& r, EqualFinite&& equal_finite, Element&& element) {
  const uint64_t pe = poison_bits(got.dtype(), expected_poison), pg = poison_bits(got.dtype(), got_poison);
  switch (got.dtype()) {
    case DType::fp8_e4m3: return scan_float_words<uint8_t>(expected, pe, got, pg, r, equal_finite, element);
    case DType::bf16: return scan_float_words<uint16_t>(expected, pe, got, pg, r, equal_finite, element);
    case DType::f32: return scan_float_words<uint32_t>(expected, pe, got, pg, r, equal_finite, element);
    default: throw std::logic_error(dtype_name(got.dtype()) + " is not a float dtype");
  }
}

int64_t row_count(const HostTensor& t) { return t.shape().empty() ? 1 : t.shape()[0]; }

std::string row_index(const Shape& shape, int64_t row) {
  std::string s = "[" + std::to_string(row);
  for (size_t d = 1; d < shape.size(); ++d) s += ", :";
  return s + "]";
}

// Element i written by one side only: counted and kept among the worst.
void write_mismatch(OutputComparison& r, const HostTensor& expected, bool exp_unwritten, const HostTensor& got,
                    bool got_unwritten, int64_t i) {
  ++r.write_mismatches;
  keep_worst(r.worst, {i, expected.index_string(i), exp_unwritten ? "(unwritten)" : format_value(expected.get(i)),
                       got_unwritten ? "(unwritten)" : format_value(got.get(i)), kInf, 0});
}

// Per row, the multisets of indices written by both sides (-1 padding included) must be equal,
// except for indices whose score is tied with the reference set's lowest (the boundary): which of
// the tied candidates makes the cut is the kernel's choice. Ties are within the scores' class.
void compare_topk_sets(const HostTensor& expected, Poison expected_poison, const HostTensor& got, Poison got_poison,
                       const OutputCheck& check, const HostTensor& scores, OutputComparison& r) {
  const int64_t rows = row_count(got), k = rows ? r.elements / rows : 0;
  if (row_count(scores) != rows)
    throw std::logic_error(r.output + ": topk_set scores " + shape_string(scores.shape()) + " have not the " +
                           std::to_string(rows) + " rows of the indices");
  const int64_t candidates = rows ? scores.numel() / rows : 0;
  for (int64_t row = 0; row < rows; ++row) {
    std::vector<int64_t> in_expected, in_got;
    for (int64_t i = row * k; i < (row + 1) * k; ++i) {
      const bool exp_unwritten = is_poison(expected, i, expected_poison);
      const bool got_unwritten = is_poison(got, i, got_poison);
      if (exp_unwritten && got_unwritten) ++r.unwritten;
      else if (exp_unwritten != got_unwritten) write_mismatch(r, expected, exp_unwritten, got, got_unwritten, i);
      else {
        ++r.compared;
        in_expected.push_back(static_cast<int64_t>(expected.get(i)));
        in_got.push_back(static_cast<int64_t>(got.get(i)));
      }
    }
    const auto score_of = [&](int64_t index) {
      return index >= 0 && index < candidates ? scores.get(row * candidates + index) : std::nan("");
    };
    double boundary = kInf;
    for (int64_t index : in_expected) boundary = std::min(boundary, score_of(index));
    const double tolerance = std::isfinite(boundary) ? allowed_error(check, boundary) : 0;
    std::sort(in_expected.begin(), in_expected.end());
    std::sort(in_got.begin(), in_got.end());
    std::vector<int64_t> missing, extra;
    std::set_difference(in_expected.begin(), in_expected.end(), in_got.begin(), in_got.end(),
                        std::back_inserter(missing));
    std::set_difference(in_got.begin(), in_got.end(), in_expected.begin(), in_expected.end(),
                        std::back_inserter(extra));
    // A row that differs beyond ties is reported whole: the indices in one set only, with their scores.
    double worst_distance = 0;
    int64_t untied = 0;
    const auto describe = [&](const std::vector<int64_t>& indices) {
      std::string s;
      for (int64_t index : indices) {
        const double score = score_of(index);
        const double distance = std::isfinite(boundary) && std::isfinite(score) ? std::fabs(score - boundary) : kInf;
        worst_distance = std::max(worst_distance, distance);
        if (distance > tolerance) ++untied;
        s += (s.empty() ? "" : ", ") + (index == -1 ? std::string("padding -1")
                                                    : "index " + std::to_string(index) + " (score " +
                                                          format_value(score) + ")");
      }
      return s.empty() ? std::string("(none)") : s;
    };
    const std::string only_expected = describe(missing), only_got = describe(extra);
    r.budget_used = std::max(r.budget_used, budget_ratio(worst_distance, tolerance));
    if (untied == 0) {
      r.tied_swaps += static_cast<int64_t>(extra.size());
      continue;
    }
    r.value_mismatches += untied;
    keep_worst(r.worst, {row * k, row_index(got.shape(), row) + " (boundary score " + format_value(boundary) + ")",
                         only_expected, only_got, worst_distance, tolerance});
  }
}

}  // namespace

std::string comparator_name(Comparator comparator) {
  switch (comparator) {
    case Comparator::elementwise: return "elementwise";
    case Comparator::row_rel_l2: return "row_rel_l2";
    case Comparator::topk_set: return "topk_set";
  }
  throw std::logic_error("unknown comparator");
}

OutputComparison compare_output(const std::string& name, const HostTensor& expected, Poison expected_poison,
                                const HostTensor& got, Poison got_poison, const OutputCheck& check,
                                const TensorMap* scores) {
  OutputComparison r;
  r.output = name;
  r.dtype = dtype_name(got.dtype());
  r.tolerance = tolerance_spec(check.tolerance).name;
  r.comparator = comparator_name(check.comparator);
  if (expected.dtype() != got.dtype() || expected.shape() != got.shape()) {
    r.write_mismatches = 1;
    r.worst.push_back({0, "(whole tensor)", dtype_name(expected.dtype()) + shape_string(expected.shape()),
                       dtype_name(got.dtype()) + shape_string(got.shape()), 0, 0});
    return r;
  }
  r.elements = got.numel();
  const bool is_float = dtype_is_float(got.dtype());
  if (check.comparator == Comparator::topk_set) {
    const auto it = scores ? scores->find(check.scores) : TensorMap::const_iterator{};
    if (is_float || !scores || it == scores->end())
      throw std::logic_error(name + ": topk_set compares integer outputs and needs the scores tensor \"" +
                             check.scores + "\" among the reference's tensors");
    compare_topk_sets(expected, expected_poison, got, got_poison, check, it->second, r);
    return r;
  }
  const bool by_row = check.comparator == Comparator::row_rel_l2;
  if (by_row && !is_float) throw std::logic_error(name + ": row_rel_l2 compares float outputs");
  const int64_t row_size = r.elements ? r.elements / row_count(got) : 1;
  struct RowSums {
    double diff_sq = 0, exp_sq = 0, magnitude_sq = 0, signed_error = 0;
    int64_t count = 0;
  };
  const HostTensor* magnitudes = nullptr;
  if (by_row && !check.scores.empty()) {
    const auto it = scores ? scores->find(check.scores) : TensorMap::const_iterator{};
    if (!scores || it == scores->end() || it->second.shape() != got.shape())
      throw std::logic_error(name + ": row_rel_l2 needs the magnitudes tensor \"" + check.scores +
                             "\" of its shape among the reference's tensors");
    magnitudes = &it->second;
  }
  std::vector<RowSums> row_sums(by_row ? static_cast<size_t>(row_count(got)) : 0);
  double diff_sq = 0, exp_sq = 0, got_sq = 0, dot = 0;
  double signed_error_ulps = 0;
  int64_t exact_agreements = 0;
  // The general comparison of element i: integers where the typed scan found unequal bits or
  // poison, floats where the scan below found no equal finite pair.
  const auto compare_element = [&](int64_t i) {
    const bool exp_unwritten = is_poison(expected, i, expected_poison);
    const bool got_unwritten = is_poison(got, i, got_poison);
    if (exp_unwritten && got_unwritten) { ++r.unwritten; return; }
    if (exp_unwritten != got_unwritten) {
      write_mismatch(r, expected, exp_unwritten, got, got_unwritten, i);
      return;
    }
    const double e = expected.get(i), g = got.get(i);
    ++r.compared;
    if (std::isnan(e)) ++r.nan_expected;
    if (std::isnan(g)) ++r.nan_got;
    if (std::isinf(g)) ++r.inf_got;
    const bool finite = std::isfinite(e) && std::isfinite(g);
    double error, allowed;
    if (check.tolerance == ToleranceClass::exact || !is_float) {
      // Differing bits always fail, also where the difference is NaN (NaN vs a number) or 0 (-0 vs 0).
      error = 0;
      if (expected.bits(i) != got.bits(i)) {
        const double diff = std::fabs(e - g);
        error = std::isnan(diff) ? kInf : std::max(diff, std::numeric_limits<double>::min());
      }
      allowed = 0;
    } else if (!finite) {
      const bool same = (std::isnan(e) && std::isnan(g)) || e == g;
      error = same ? 0 : kInf;
      allowed = 0;
    } else {
      error = std::fabs(e - g);
      // Under row_rel_l2 an element has no bound of its own: its row has.
      allowed = by_row ? kInf : allowed_error(check, e);
      diff_sq += error * error;
      exp_sq += e * e;
      got_sq += g * g;
      dot += e * g;
      if (e != 0) r.max_rel_error = std::max(r.max_rel_error, error / std::fabs(e));
    }
    if (is_float && finite) {
      ++r.distribution_elements;
      if (e == g) ++exact_agreements;
      if (by_row) {
        RowSums& row = row_sums[static_cast<size_t>(i / row_size)];
        row.diff_sq += error * error, row.exp_sq += e * e, row.signed_error += g - e, ++row.count;
        if (magnitudes) row.magnitude_sq += magnitudes->get(i) * magnitudes->get(i);
      } else {
        signed_error_ulps += (g - e) / distribution_ulp(check, got.dtype(), e);
      }
    }
    if (std::isfinite(error)) r.max_abs_error = std::max(r.max_abs_error, error);
    if (std::isfinite(allowed)) r.budget_used = std::max(r.budget_used, budget_ratio(error, allowed));
    if (error > allowed) {
      ++r.value_mismatches;
      keep_worst(r.worst, {i, expected.index_string(i), format_value(e), format_value(g), error, allowed});
    }
  };
  if (!is_float) {
    for (int64_t i : integers_needing_a_look(expected, expected_poison, got, got_poison, r)) compare_element(i);
  } else {
    // Why a fast path: the graph-replay test compares each batch size's whole outputs twice (with
    // the reference, and bitwise with eager), and element by element that was most of its host time
    // (sparse_attention: ~50 of its 83 s). It must keep every field of the result
    // bit-identical, so it does exactly what compare_element does for e == g finite, in the same
    // index order, minus the terms that are +0 or no-ops:
    // - error 0: max_abs_error, max_rel_error and budget_used take max(x, +0) with x >= +0, never
    //   NaN (each starts at +0 and std::max keeps it against NaN); allowed is 0 (exact), +inf
    //   (row_rel_l2) or a positive ulp-based bound, so 0 > allowed never holds;
    // - diff_sq and each row's diff_sq add 0 * 0, the signed errors add (e - e) = +0 and +0 / ulp
    //   (dtype_ulp is a power of two >= 2^-149, never 0): x + +0 == x except x = -0, and these sums
    //   start at +0 and become -0 only as -0 + -0 (round to nearest), so they are never -0;
    // - got_sq += g * g and dot += e * g with g == e are written as e * e, the same expression.
    // allowed_error throws for a check without a per-element bound (fp32_over_bf16_stage
    // elementwise, a missing K) whatever the value: the first such element takes compare_element,
    // so that the throw stays where it was.
    const bool sums = check.tolerance != ToleranceClass::exact;
    bool bound_checked = false;
    const auto equal_finite = [&](int64_t i, double e) {
      if (!bound_checked) {
        bound_checked = true;
        compare_element(i);
        return;
      }
      ++r.compared;
      if (sums) {
        exp_sq += e * e;
        got_sq += e * e;
        dot += e * e;
      }
      ++r.distribution_elements;
      ++exact_agreements;
      if (by_row) {
        RowSums& row = row_sums[static_cast<size_t>(i / row_size)];
        row.exp_sq += e * e, ++row.count;
        if (magnitudes) row.magnitude_sq += magnitudes->get(i) * magnitudes->get(i);
      }
    };
    scan_floats(expected, expected_poison, got, got_poison, r, equal_finite, compare_element);
  }
  if (by_row) {
    const double allowed = allowed_row_rel_l2(check);
    for (size_t row = 0; row < row_sums.size(); ++row) {
      const RowSums& s = row_sums[row];
      if (s.count == 0) continue;
      const double rms = std::sqrt(s.exp_sq / static_cast<double>(s.count));
      signed_error_ulps += s.signed_error / distribution_ulp(check, got.dtype(), rms);
      const double norm_sq = std::max(s.exp_sq, s.magnitude_sq);  // magnitudes: OutputCheck says why
      const double rel = norm_sq > 0 ? std::sqrt(s.diff_sq / norm_sq) : (s.diff_sq > 0 ? kInf : 0);
      r.budget_used = std::max(r.budget_used, budget_ratio(rel, allowed));
      if (rel > allowed) {
        ++r.value_mismatches;
        keep_worst(r.worst, {static_cast<int64_t>(row) * row_size, row_index(got.shape(), static_cast<int64_t>(row)),
                             "row L2 " + format_value(std::sqrt(s.exp_sq)),
                             "error L2 " + format_value(std::sqrt(s.diff_sq)), rel, allowed});
      }
    }
  }
  r.rel_l2_error = exp_sq > 0 ? std::sqrt(diff_sq / exp_sq) : std::sqrt(diff_sq);
  r.cosine = (exp_sq > 0 && got_sq > 0) ? dot / std::sqrt(exp_sq * got_sq) : (exp_sq == got_sq ? 1 : 0);
  if (is_float) {
    const DistributionBound& bound = r.distribution_bound = distribution_bound(check);
    if (r.distribution_elements > 0) {
      const double n = static_cast<double>(r.distribution_elements);
      r.exact_agreement_rate = static_cast<double>(exact_agreements) / n;
      r.mean_signed_error_ulps = signed_error_ulps / n;
    }
    r.distribution_checked = r.distribution_elements >= bound.min_elements;
    r.distribution_passed = !r.distribution_checked || (r.exact_agreement_rate >= bound.min_exact_rate &&
                                                        std::fabs(r.mean_signed_error_ulps) <= bound.max_mean_ulps);
  }
  return r;
}

std::string OutputComparison::summary() const {
  char line[512];
  std::snprintf(line, sizeof(line),
                "%s (%s, %s, %s): %s; %lld compared, %lld unwritten on both sides, %lld written by one "
                "side only, %lld beyond tolerance; max abs %.3g, max rel %.3g, rel L2 %.3g, cosine "
                "%.6f, NaN %lld/%lld, budget used %.3g",
                output.c_str(), dtype.c_str(), tolerance.c_str(), comparator.c_str(), passed() ? "ok" : kMismatchMark,
                static_cast<long long>(compared), static_cast<long long>(unwritten),
                static_cast<long long>(write_mismatches), static_cast<long long>(value_mismatches),
                max_abs_error, max_rel_error, rel_l2_error, cosine,
                static_cast<long long>(nan_expected), static_cast<long long>(nan_got), budget_used);
  std::string s = line;
  if (comparator == comparator_name(Comparator::topk_set))
    s += "; " + std::to_string(tied_swaps) + " indices swapped among ties at the boundary";
  if (distribution_elements > 0) {
    std::snprintf(line, sizeof(line),
                  "; exact agreement %.4g%% (bound >= %.4g%%), mean signed error %+.3g ulp (bound +-%.3g)%s",
                  100 * exact_agreement_rate, 100 * distribution_bound.min_exact_rate, mean_signed_error_ulps,
                  distribution_bound.max_mean_ulps, distribution_checked ? "" : ", too few elements to check");
    s += line;
  }
  if (!distribution_passed)
    s += "\n  distribution beyond its bounds: a systematic error that each element's bound lets through";
  if (write_mismatches > 0 || value_mismatches > 0) {
    s += comparator == comparator_name(Comparator::row_rel_l2)
             ? "\n  worst (row: its L2 norm vs its error's, relative error > allowed; or element: expected vs got):"
         : comparator == comparator_name(Comparator::topk_set)
             ? "\n  worst (row: indices in the expected set only vs in the got set only, |score - boundary| > "
               "score tolerance):"
             : "\n  worst elements (index: expected vs got, |error| > allowed):";
    for (const ElementMismatch& m : worst)
      s += "\n    " + m.index + ": " + m.expected + " vs " + m.got + ", |error| " + format_value(m.error) +
           " > " + format_value(m.allowed);
  }
  return s;
}

}  // namespace dsv4h
