#include "stats.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace dsv4h::report {

namespace {

// Exact two-sided p-value of U without ties: the number of orderings of m a's and n b's with each
// U, from c(i, j, u) = c(i-1, j, u-j) + c(i, j-1, u) (the largest value is an a, beating all j
// b's, or a b). Counts reach C(100, 50) ~ 1e29 at the size limit, exact enough in doubles.
double exact_p_value(size_t m, size_t n, double u) {
  const size_t max_u = m * n;
  std::vector<std::vector<double>> prev(n + 1, std::vector<double>(max_u + 1, 0.0)), cur = prev;
  for (size_t j = 0; j <= n; ++j) prev[j][0] = 1;  // i = 0: one ordering, U = 0
  for (size_t i = 1; i <= m; ++i) {
    for (size_t j = 0; j <= n; ++j) {
      for (size_t k = 0; k <= max_u; ++k) {
        const double from_a = k >= j ? prev[j][k - j] : 0.0;
        cur[j][k] = from_a + (j > 0 ? cur[j - 1][k] : 0.0);
      }
    }
    std::swap(prev, cur);
  }
  const std::vector<double>& counts = prev[n];
  const double total = std::accumulate(counts.begin(), counts.end(), 0.0);
  const size_t observed = static_cast<size_t>(std::llround(u));
  const double at_most = std::accumulate(counts.begin(), counts.begin() + observed + 1, 0.0);
  const double at_least = std::accumulate(counts.begin() + observed, counts.end(), 0.0);
  return std::min(1.0, 2.0 * std::min(at_most, at_least) / total);
}

}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) throw std::invalid_argument("median of no values");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

double coefficient_of_variation(const std::vector<double>& values) {
  if (values.size() < 2) return 0.0;
  const double mean = std::accumulate(values.begin(), values.end(), 0.0) / values.size();
  double sum_sq = 0;
  for (double v : values) sum_sq += (v - mean) * (v - mean);
  return std::sqrt(sum_sq / (values.size() - 1)) / mean;
}

// Ranks over both samples, ties sharing their average rank; U of a = rank sum of a - m(m+1)/2.
// Without ties and with both samples of at most 50 values, the p-value is exact (above). With
// ties or larger samples it is the normal approximation with the tie-corrected variance
// mn/12 * ((N+1) - sum(t^3 - t) / (N(N-1))) and a continuity correction of 1/2, which is close
// to exact from n = 10 per side on and conservative below.
MannWhitney mann_whitney(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.empty() || b.empty()) throw std::invalid_argument("Mann-Whitney test of an empty sample");
  const size_t m = a.size(), n = b.size(), total = m + n;
  std::vector<std::pair<double, bool>> all;  // value, from a
  for (double v : a) all.emplace_back(v, true);
  for (double v : b) all.emplace_back(v, false);
  std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  double rank_sum_a = 0, tie_term = 0;
  for (size_t i = 0; i < total;) {
    size_t j = i;
    while (j < total && all[j].first == all[i].first) ++j;
    const double shared_rank = 0.5 * (i + 1 + j);  // average of ranks i+1 .. j
    for (size_t k = i; k < j; ++k) rank_sum_a += all[k].second ? shared_rank : 0.0;
    const double t = static_cast<double>(j - i);
    tie_term += t * t * t - t;
    i = j;
  }
  const double u = rank_sum_a - 0.5 * m * (m + 1);
  if (tie_term == 0 && m <= 50 && n <= 50) return {u, exact_p_value(m, n, u)};
  const double mean_u = 0.5 * m * n;
  const double var_u = m * n / 12.0 * ((total + 1) - tie_term / (static_cast<double>(total) * (total - 1)));
  if (var_u <= 0) return {u, 1.0};  // every value equal
  const double z = std::max(0.0, std::fabs(u - mean_u) - 0.5) / std::sqrt(var_u);
  return {u, std::erfc(z / std::sqrt(2.0))};
}

// Step rule: every split of the nightly medians with at least kMinSide nights on each side is
// scored by |median(after) - median(before)| / pooled spread, the pooled spread being the mean
// absolute deviation of each night from its own side's median (a night put on the wrong side
// adds its whole shift to the spread, so the best score falls on the true split). The best split
// is a step when the Mann-Whitney test between the two sides gives p < alpha and the shift
// |after / before - 1| exceeds the threshold. With alpha 0.05 the test can only reach p < alpha
// when the sides are long enough (2 nights after a step need at least 8 before it, 3 after need
// 5): a step in the last nights of a short history shows up in the night-to-night compare first.
std::optional<Step> detect_step(const std::vector<double>& nightly_medians, double threshold, double alpha) {
  constexpr size_t kMinSide = 2;
  const size_t n = nightly_medians.size();
  if (n < 2 * kMinSide) return std::nullopt;
  std::optional<size_t> best;
  double best_score = -1;
  for (size_t k = kMinSide; k + kMinSide <= n; ++k) {
    const std::vector<double> before(nightly_medians.begin(), nightly_medians.begin() + k);
    const std::vector<double> after(nightly_medians.begin() + k, nightly_medians.end());
    const double med_before = median(before), med_after = median(after);
    double deviation = 0;
    for (double v : before) deviation += std::fabs(v - med_before);
    for (double v : after) deviation += std::fabs(v - med_after);
    // A floor far below any timing noise keeps two perfectly flat sides comparable.
    const double spread = std::max(deviation / n, 1e-9 * std::max(std::fabs(med_before), std::fabs(med_after)));
    const double score = std::fabs(med_after - med_before) / spread;
    if (score > best_score) best_score = score, best = k;
  }
  // Every score NaN (medians so large their deviations overflow): no split can be told apart.
  if (!best) return std::nullopt;
  const size_t k = *best;
  const std::vector<double> before(nightly_medians.begin(), nightly_medians.begin() + k);
  const std::vector<double> after(nightly_medians.begin() + k, nightly_medians.end());
  Step step{k, median(before), median(after), 0.0, mann_whitney(after, before).p_value};
  step.change = step.after_median / step.before_median - 1;
  if (step.p_value < alpha && std::fabs(step.change) > threshold) return step;
  return std::nullopt;
}

}  // namespace dsv4h::report
