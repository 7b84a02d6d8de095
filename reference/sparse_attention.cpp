#include "sparse_attention.h"

#include <Eigen/Dense>
#include <cfloat>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "errors.h"
#include "kv_cache_model1.h"
#include "narrow_float.h"
#include "rope.h"

namespace dsv4h::reference {
namespace {

// The valid keys of one row, dequantised, appended to `keys` (one per row of the matrix); a -1
// under minus_one_unmasked becomes a zero key.
void gather_scope(const AttentionScope& scope, int64_t row, int64_t extra_columns, const char* name,
                  bool minus_one_unmasked, std::vector<Eigen::VectorXd>& keys) {
  if (scope.cache == nullptr) return;
  const int64_t length = scope.lengths[row];
  if (length < 0 || length > scope.width)
    throw BadInput(std::string("sparse_attention: ") + name + " length of row " + std::to_string(row) + " = " +
                   std::to_string(length) + " outside [0, " + std::to_string(scope.width) + "]");
  const int64_t page_bytes = model1_page_bytes(scope.tokens_per_page);
  const int64_t columns = std::min(length + extra_columns, scope.width);
  uint16_t latent[kAttentionDims];
  for (int64_t j = 0; j < columns; ++j) {
    const int32_t slot = scope.indices[row * scope.width + j];
    if (slot == -1) {
      if (minus_one_unmasked) keys.push_back(Eigen::VectorXd::Zero(kAttentionDims));
      continue;
    }
    if (slot < 0 || slot >= scope.slots)
      throw BadInput(std::string("sparse_attention: ") + name + " index [" + std::to_string(row) + ", " +
                     std::to_string(j) + "] = " + std::to_string(slot) + " outside the pool's " +
                     std::to_string(scope.slots) + " slots (only -1 marks an invalid entry)");
    model1_unpack_token(scope.cache + slot / scope.tokens_per_page * page_bytes, scope.tokens_per_page,
                        slot % scope.tokens_per_page, latent);
    Eigen::VectorXd k(kAttentionDims);
    for (int d = 0; d < kAttentionDims; ++d) k(d) = bf16_to_float(latent[d]);
    keys.push_back(k);
  }
}

}  // namespace

SparseAttentionResult sparse_attention(const SparseAttentionProblem& pr, const SparseAttentionBugs& bugs) {
  SparseAttentionResult result;
  result.out.assign(static_cast<size_t>(pr.rows * pr.heads * kAttentionDims), 0.0);
  result.lse.assign(static_cast<size_t>(pr.rows * pr.heads), 0.0);
  const Eigen::VectorXd freqs = rope_frequencies(rope_for_ratio(pr.compress_ratio));
  const double scale = bugs.scale_448 ? 1 / std::sqrt(448.0) : pr.scale;
  AttentionScope window = pr.window;
  std::vector<int32_t> short_lengths;
  if (bugs.window_short) {  // the same indices, read up to min(length, 127)
    short_lengths.assign(window.lengths, window.lengths + pr.rows);
    for (int32_t& l : short_lengths) l = std::min(l, 127);
    window.lengths = short_lengths.data();
  }
  std::vector<Eigen::VectorXd> keys;
  for (int64_t n = 0; n < pr.rows; ++n) {
    keys.clear();
    gather_scope(window, n, 0, "window", bugs.minus_one_unmasked, keys);
    gather_scope(pr.extra, n, bugs.extra_one_too_many ? 1 : 0, "extra", bugs.minus_one_unmasked, keys);
    const int64_t count = static_cast<int64_t>(keys.size());
    Eigen::MatrixXd kv(count, kAttentionDims);
    for (int64_t i = 0; i < count; ++i) kv.row(i) = keys[i].transpose();
    // All heads at once: scores S = Q K^T (heads x keys), one softmax per head's row.
    Eigen::MatrixXd q(pr.heads, kAttentionDims);
    for (int64_t h = 0; h < pr.heads; ++h)
      for (int d = 0; d < kAttentionDims; ++d) q(h, d) = bf16_to_float(pr.q[(n * pr.heads + h) * kAttentionDims + d]);
    const Eigen::MatrixXd scores = q * kv.transpose() * scale;
    Eigen::MatrixXd weights(pr.heads, count);
    Eigen::VectorXd sums(pr.heads), maxima(pr.heads);
    for (int64_t h = 0; h < pr.heads && count > 0; ++h) {
      maxima(h) = scores.row(h).maxCoeff();
      weights.row(h) = (scores.row(h).array() - maxima(h)).exp().matrix();
      sums(h) = weights.row(h).sum();
    }
    const Eigen::MatrixXd numerators = weights * kv;
    for (int64_t h = 0; h < pr.heads; ++h) {
      double* o = &result.out[static_cast<size_t>((n * pr.heads + h) * kAttentionDims)];
      double& lse = result.lse[static_cast<size_t>(n * pr.heads + h)];
      if (count == 0) {
        const double fill = bugs.empty_row_nan ? std::numeric_limits<double>::quiet_NaN() : 0.0;
        for (int d = 0; d < kAttentionDims; ++d) o[d] = fill;
        lse = bugs.empty_row_nan ? fill : -static_cast<double>(FLT_MAX);
        continue;
      }
      const double m = maxima(h), sum = sums(h), sink = std::exp(static_cast<double>(pr.sink[h]) - m);
      lse = m + std::log(sum);
      Eigen::VectorXd out = numerators.row(h).transpose();
      if (bugs.sink_in_numerator) out.array() += sink;
      out /= bugs.sink_ignored ? sum : sum + sink;
      if (!bugs.rope_not_inverted)
        apply_rope(out.segment(kAttentionDims - kRopeDim, kRopeDim), pr.positions[n], freqs, true);
      for (int d = 0; d < kAttentionDims; ++d) o[d] = out(d);
    }
  }
  return result;
}

}  // namespace dsv4h::reference
