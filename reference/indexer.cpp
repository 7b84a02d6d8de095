#include "indexer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

#include "errors.h"
#include "narrow_float.h"
#include "rope.h"

namespace dsv4h::reference {
namespace {

// The smallest e with max(amax, 1e-4) / 448 <= 2^e, exactly.
int fp8_scale_exponent(double amax) {
  int e = 0;
  const double m = std::frexp(std::max(amax, double{1e-4f}) / 448.0, &e);
  return m == 0.5 ? e - 1 : e;
}

// e2m1 values, index = code magnitude; a tie goes to the even code (round to nearest even).
constexpr double kFp4Grid[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

double fp4_round(double x) {
  const double a = std::min(std::fabs(x), 6.0);
  int best = 0;
  for (int i = 1; i < 8; ++i) {
    const double d = std::fabs(kFp4Grid[i] - a), db = std::fabs(kFp4Grid[best] - a);
    if (d < db || (d == db && i % 2 == 0)) best = i;
  }
  return std::copysign(kFp4Grid[best], x);
}

// Spec 3.5: scale 2^ceil(log2(max(amax, 6 * 2^-126) / 6)) per block of 32.
void fp4_qdq_block32(Eigen::RowVectorXd& row) {
  for (int b = 0; b < row.size(); b += 32) {
    const double amax = row.segment(b, 32).cwiseAbs().maxCoeff();
    int e = 0;
    const double m = std::frexp(std::max(amax, 6 * std::ldexp(1.0, -126)) / 6, &e);
    const int exponent = m == 0.5 ? e - 1 : e;
    for (int i = b; i < b + 32; ++i) row(i) = std::ldexp(fp4_round(std::ldexp(row(i), -exponent)), exponent);
  }
}

}  // namespace

Eigen::MatrixXd hadamard128(const Eigen::MatrixXd& x) {
  if (x.cols() != kIndexerHeadDim) throw BadInput("hadamard128: rows of 128 values expected");
  Eigen::MatrixXd y = x;
  for (int half = 1; half < kIndexerHeadDim; half *= 2)
    for (int i = 0; i < kIndexerHeadDim; i += 2 * half)
      for (int j = i; j < i + half; ++j) {
        const Eigen::VectorXd a = y.col(j), b = y.col(j + half);
        y.col(j) = a + b;
        y.col(j + half) = a - b;
      }
  return y / std::sqrt(double{kIndexerHeadDim});
}

IndexerQuery indexer_query(const Eigen::MatrixXd& q, int64_t pos, const Eigen::VectorXd& freqs, IndexerQuant quant) {
  if (q.cols() != kIndexerHeadDim) throw BadInput("indexer_query: q rows of 128 values expected");
  Eigen::MatrixXd roped = q;
  for (Eigen::Index h = 0; h < q.rows(); ++h) {
    Eigen::VectorXd tail = roped.row(h).tail(kRopeDim).transpose();
    apply_rope(tail, pos, freqs);
    roped.row(h).tail(kRopeDim) = tail.transpose();
  }
  IndexerQuery out;
  out.values = hadamard128(roped);
  if (quant == IndexerQuant::fp4_block32) {
    for (Eigen::Index h = 0; h < q.rows(); ++h) {
      Eigen::RowVectorXd row = out.values.row(h);
      fp4_qdq_block32(row);
      out.values.row(h) = row;
    }
    return out;
  }
  out.fp8.resize(static_cast<size_t>(q.rows() * kIndexerHeadDim));
  for (Eigen::Index h = 0; h < q.rows(); ++h) {
    const int e = fp8_scale_exponent(out.values.row(h).cwiseAbs().maxCoeff());
    out.scale_exp.push_back(e);
    for (int i = 0; i < kIndexerHeadDim; ++i) {
      const uint8_t code = double_to_fp8_e4m3(std::ldexp(out.values(h, i), -e));
      out.fp8[static_cast<size_t>(h * kIndexerHeadDim + i)] = code;
      out.values(h, i) = std::ldexp(double{fp8_e4m3_to_float(code)}, e);
    }
  }
  return out;
}

Eigen::VectorXd indexer_scores(const Eigen::MatrixXd& q, const Eigen::VectorXd& weights, const Eigen::MatrixXd& keys,
                               int64_t visible) {
  if (q.rows() != weights.size() || q.cols() != kIndexerHeadDim || keys.cols() != kIndexerHeadDim)
    throw BadInput("indexer_scores: q [heads, 128], weights [heads] and keys [width, 128] expected");
  if (visible < 0 || visible > keys.rows())
    throw BadInput("indexer_scores: visible entries " + std::to_string(visible) + " outside [0, " +
                   std::to_string(keys.rows()) + "]");
  Eigen::VectorXd scores = Eigen::VectorXd::Constant(keys.rows(), -std::numeric_limits<double>::infinity());
  if (visible == 0) return scores;
  const Eigen::MatrixXd dots = keys.topRows(visible) * q.transpose();  // [visible, heads]
  scores.head(visible) = dots.cwiseMax(0.0) * weights;
  return scores;
}

std::vector<int32_t> indexer_topk(const Eigen::VectorXd& scores, int64_t visible, int64_t topk) {
  if (topk < 1 || visible < 0 || visible > scores.size())
    throw BadInput("indexer_topk: topk >= 1 and visible in [0, " + std::to_string(scores.size()) + "] expected");
  std::vector<int32_t> raw(static_cast<size_t>(topk), -1);
  if (visible <= topk) {
    std::iota(raw.begin(), raw.begin() + visible, 0);
    return raw;
  }
  std::vector<int32_t> order(static_cast<size_t>(visible));
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + topk, order.end(), [&](int32_t a, int32_t b) {
    return scores(a) > scores(b) || (scores(a) == scores(b) && a < b);
  });
  std::copy(order.begin(), order.begin() + topk, raw.begin());
  return raw;
}

std::vector<int32_t> c4_page_slots(const std::vector<int32_t>& raw, const int32_t* page_table_row, int64_t pages,
                                   int64_t entries_per_page) {
  std::vector<int32_t> slots(raw.size(), -1);
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == -1) continue;
    if (raw[i] < 0 || raw[i] >= pages * entries_per_page)
      throw BadInput("c4_page_slots: index " + std::to_string(raw[i]) + " outside the row's " + std::to_string(pages) +
                     " pages (only -1 marks an empty slot)");
    const int64_t page = page_table_row[raw[i] / entries_per_page];
    slots[i] = static_cast<int32_t>(page * entries_per_page + raw[i] % entries_per_page);
  }
  return slots;
}

}  // namespace dsv4h::reference
