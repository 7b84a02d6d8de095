#include "compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

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

void keep_worst(std::vector<ElementMismatch>& worst, ElementMismatch m) {
  worst.push_back(std::move(m));
  auto ratio = [](const ElementMismatch& e) {
    return e.allowed > 0 ? e.error / e.allowed : std::numeric_limits<double>::infinity();
  };
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

}  // namespace

OutputComparison compare_output(const std::string& name, const HostTensor& expected, Poison expected_poison,
                                const HostTensor& got, Poison got_poison, ToleranceClass tolerance) {
  OutputComparison r;
  r.output = name;
  r.dtype = dtype_name(got.dtype());
  r.tolerance = tolerance_spec(tolerance).name;
  if (expected.dtype() != got.dtype() || expected.shape() != got.shape()) {
    r.write_mismatches = 1;
    r.worst.push_back({0, "(whole tensor)", dtype_name(expected.dtype()) + shape_string(expected.shape()),
                       dtype_name(got.dtype()) + shape_string(got.shape()), 0, 0});
    return r;
  }
  r.elements = got.numel();
  const bool is_float = dtype_is_float(got.dtype());
  // Floats go element by element; integers only where the typed scan found unequal bits or poison.
  const std::vector<int64_t> left = is_float ? std::vector<int64_t>{}
                                             : integers_needing_a_look(expected, expected_poison, got, got_poison, r);
  const int64_t general_count = is_float ? r.elements : static_cast<int64_t>(left.size());
  double diff_sq = 0, exp_sq = 0, got_sq = 0, dot = 0;
  for (int64_t k = 0; k < general_count; ++k) {
    const int64_t i = is_float ? k : left[static_cast<size_t>(k)];
    const bool exp_unwritten = is_poison(expected, i, expected_poison);
    const bool got_unwritten = is_poison(got, i, got_poison);
    if (exp_unwritten && got_unwritten) { ++r.unwritten; continue; }
    const double e = expected.get(i), g = got.get(i);
    if (exp_unwritten != got_unwritten) {
      ++r.write_mismatches;
      keep_worst(r.worst, {i, expected.index_string(i), exp_unwritten ? "(unwritten)" : format_value(e),
                           got_unwritten ? "(unwritten)" : format_value(g),
                           std::numeric_limits<double>::infinity(), 0});
      continue;
    }
    ++r.compared;
    if (std::isnan(e)) ++r.nan_expected;
    if (std::isnan(g)) ++r.nan_got;
    if (std::isinf(g)) ++r.inf_got;
    double error, allowed;
    if (tolerance == ToleranceClass::exact || !is_float) {
      // Differing bits always fail, also where the difference is NaN (NaN vs a number) or 0 (-0 vs 0).
      error = 0;
      if (expected.bits(i) != got.bits(i)) {
        const double diff = std::fabs(e - g);
        error = std::isnan(diff) ? std::numeric_limits<double>::infinity()
                                 : std::max(diff, std::numeric_limits<double>::min());
      }
      allowed = 0;
    } else if (std::isnan(e) || std::isnan(g) || std::isinf(e) || std::isinf(g)) {
      const bool same = (std::isnan(e) && std::isnan(g)) || e == g;
      error = same ? 0 : std::numeric_limits<double>::infinity();
      allowed = 0;
    } else {
      error = std::fabs(e - g);
      allowed = allowed_error(tolerance, e);
      diff_sq += error * error;
      exp_sq += e * e;
      got_sq += g * g;
      dot += e * g;
      if (e != 0) r.max_rel_error = std::max(r.max_rel_error, error / std::fabs(e));
    }
    if (std::isfinite(error)) r.max_abs_error = std::max(r.max_abs_error, error);
    const double used = allowed > 0 ? error / allowed : (error > 0 ? std::numeric_limits<double>::infinity() : 0);
    r.budget_used = std::max(r.budget_used, used);
    if (error > allowed) {
      ++r.value_mismatches;
      keep_worst(r.worst, {i, expected.index_string(i), format_value(e), format_value(g), error, allowed});
    }
  }
  r.rel_l2_error = exp_sq > 0 ? std::sqrt(diff_sq / exp_sq) : std::sqrt(diff_sq);
  r.cosine = (exp_sq > 0 && got_sq > 0) ? dot / std::sqrt(exp_sq * got_sq) : (exp_sq == got_sq ? 1 : 0);
  return r;
}

std::string OutputComparison::summary() const {
  char line[512];
  std::snprintf(line, sizeof(line),
                "%s (%s, %s): %s; %lld compared, %lld unwritten on both sides, %lld written by one "
                "side only, %lld beyond tolerance; max abs %.3g, max rel %.3g, rel L2 %.3g, cosine "
                "%.6f, NaN %lld/%lld, budget used %.3g",
                output.c_str(), dtype.c_str(), tolerance.c_str(), passed() ? "ok" : "MISMATCH",
                static_cast<long long>(compared), static_cast<long long>(unwritten),
                static_cast<long long>(write_mismatches), static_cast<long long>(value_mismatches),
                max_abs_error, max_rel_error, rel_l2_error, cosine,
                static_cast<long long>(nan_expected), static_cast<long long>(nan_got), budget_used);
  std::string s = line;
  if (!passed()) {
    s += "\n  worst elements (index: expected vs got, |error| > allowed):";
    for (const ElementMismatch& m : worst)
      s += "\n    " + m.index + ": " + m.expected + " vs " + m.got + ", |error| " + format_value(m.error) +
           " > " + format_value(m.allowed);
  }
  return s;
}

}  // namespace dsv4h
