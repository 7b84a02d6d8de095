#include "compressor.h"

#include <cmath>
#include <limits>
#include <stdexcept>

#include "kv_cache_indexer.h"
#include "kv_cache_model1.h"
#include "narrow_float.h"
#include "rms_norm.h"
#include "rope.h"

namespace dsv4h::reference {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// One candidate of an entry: a token's kv and S rows from `offset` (0 for Ca, d for Cb); null rows
// are the zero-score stand-in of the absent_half_zero_score bug.
struct Candidate {
  const float* kv;
  const float* score;
  int offset;
};

// Softmax pooling per channel over the candidates, in the order given, then RMSNorm, rope at the
// entry's position and, for the indexer key, the Hadamard rotation. Both forms end here.
Eigen::VectorXd finish_entry(const CompressorConfig& config, const std::vector<Candidate>& candidates, int64_t block,
                             const CompressorWeights& weights) {
  const int d = config.dims;
  Eigen::MatrixXd pooled(1, d);
  for (int k = 0; k < d; ++k) {
    double m = -kInf;
    for (const Candidate& c : candidates) m = std::max(m, c.score ? double{c.score[c.offset + k]} : 0.0);
    double sum = 0, acc = 0;
    for (const Candidate& c : candidates) {
      const double w = std::exp((c.score ? double{c.score[c.offset + k]} : 0.0) - m);
      sum += w;
      acc += c.kv ? w * double{c.kv[c.offset + k]} : 0.0;
    }
    pooled(0, k) = acc / sum;
  }
  Eigen::VectorXd entry = rms_norm(pooled, weights.norm_weight, kCompressorNormEps).row(0).transpose();
  const int64_t position = config.ratio * block + (config.bug == CompressorBug::rope_last_position ? config.ratio - 1 : 0);
  static const Eigen::VectorXd freqs = rope_frequencies(rope_for_ratio(4));  // ratios 4 and 128 share it
  apply_rope(entry.tail(kRopeDim), position, freqs);
  if (d == kIndexerDims) {
    // hadamard128(x) / sqrt(128): Sylvester's H, H[i][k] = (-1)^popcount(i & k).
    Eigen::VectorXd rotated(d);
    for (int i = 0; i < d; ++i) {
      double s = 0;
      for (int k = 0; k < d; ++k) s += (__builtin_popcount(i & k) % 2 ? -entry(k) : entry(k));
      rotated(i) = s / std::sqrt(static_cast<double>(d));
    }
    entry = rotated;
  }
  return entry;
}

// The candidates of entry `block` from rows found by `row_of(t)` (kv and S pointers of token t,
// t >= 0): for ratio 4 the Ca halves of block j-1 (absent for j = 0), then the Cb halves of block j.
template <typename RowOf>
std::vector<Candidate> gather(const CompressorConfig& config, int64_t block, RowOf row_of) {
  std::vector<Candidate> candidates;
  const int64_t first = config.ratio * block;
  if (config.ratio == 4 && config.bug != CompressorBug::overlap_half_missing) {
    for (int64_t t = first - 4; t < first; ++t) {
      if (t >= 0) {
        const auto [kv, score] = row_of(t);
        candidates.push_back({kv, score, 0});
      } else if (config.bug == CompressorBug::absent_half_zero_score) {
        candidates.push_back({nullptr, nullptr, 0});
      }
    }
  }
  const int offset = config.ratio == 4 ? config.dims : 0;
  for (int64_t t = first; t < first + config.ratio; ++t) {
    const auto [kv, score] = row_of(t);
    candidates.push_back({kv, score, offset});
  }
  return candidates;
}

}  // namespace

int compressor_series(int ratio) { return ratio == 4 ? 2 : 1; }
int compressor_ring_rows(int ratio) { return ratio == 4 ? 8 : 128; }
void check_compressor_config(const CompressorConfig& config) {
  if (config.ratio != 4 && config.ratio != 128) throw std::invalid_argument("compressor: ratio must be 4 or 128");
  if (config.dims != kModel1Dims && config.dims != kIndexerDims)
    throw std::invalid_argument("compressor: dims must be 512 (main latent) or 128 (indexer key)");
  if (config.dims == kIndexerDims && config.ratio != 4)
    throw std::invalid_argument("compressor: the indexer key (dims 128) exists on ratio-4 layers only");
}

float compressor_state_score(float score, float ape) { return score + ape; }

Eigen::MatrixXd compress_dense(const CompressorConfig& config, const RowMatrixXf& kv, const RowMatrixXf& score,
                               const CompressorWeights& weights) {
  check_compressor_config(config);
  const int64_t width = int64_t{compressor_series(config.ratio)} * config.dims;
  if (kv.cols() != width || score.cols() != width || score.rows() != kv.rows() || weights.ape.rows() != config.ratio ||
      weights.ape.cols() != width || weights.norm_weight.size() != config.dims)
    throw std::invalid_argument("compress_dense: kv, score [T, coff d], ape [ratio, coff d], norm_weight [d]");
  RowMatrixXf s(score.rows(), width);
  for (int64_t t = 0; t < score.rows(); ++t)
    for (int64_t k = 0; k < width; ++k) s(t, k) = compressor_state_score(score(t, k), weights.ape(t % config.ratio, k));
  const int64_t entries = kv.rows() / config.ratio;
  Eigen::MatrixXd out(entries, config.dims);
  for (int64_t j = 0; j < entries; ++j) {
    const auto row_of = [&](int64_t t) { return std::pair{kv.row(t).data(), s.row(t).data()}; };
    out.row(j) = finish_entry(config, gather(config, j, row_of), j, weights).transpose();
  }
  return out;
}

RowMatrixXf compressor_clean_ring(const CompressorConfig& config) {
  check_compressor_config(config);
  const int width = compressor_series(config.ratio) * config.dims;
  RowMatrixXf ring(compressor_ring_rows(config.ratio), 2 * width);
  ring.leftCols(width).setZero();
  ring.rightCols(width).setConstant(-std::numeric_limits<float>::infinity());
  return ring;
}

std::vector<CompressorEmission> compress_extend(const CompressorConfig& config, RowMatrixXf& ring, int64_t start,
                                                const RowMatrixXf& kv, const RowMatrixXf& score,
                                                const CompressorWeights& weights) {
  check_compressor_config(config);
  const int width = compressor_series(config.ratio) * config.dims;
  const int rows = compressor_ring_rows(config.ratio);
  if (ring.rows() != rows || ring.cols() != 2 * width || kv.cols() != width || score.cols() != width ||
      score.rows() != kv.rows() || start < 0)
    throw std::invalid_argument("compress_extend: ring [ring rows, 2 coff d], kv and score [n, coff d], start >= 0");
  if (config.bug == CompressorBug::chunk_state_dropped && start % config.ratio != 0) ring = compressor_clean_ring(config);
  std::vector<CompressorEmission> emitted;
  const int late = config.bug == CompressorBug::emission_late ? 1 : 0;
  for (int64_t i = 0; i < kv.rows(); ++i) {
    const int64_t p = start + i;
    float* row = ring.row(p % rows).data();
    for (int k = 0; k < width; ++k) {
      row[k] = kv(i, k);
      row[width + k] = compressor_state_score(score(i, k), weights.ape(p % config.ratio, k));
    }
    const int64_t seq_len = p + 1 + late;
    if (seq_len % config.ratio != 0) continue;
    const int64_t block = seq_len / config.ratio - 1;
    const auto row_of = [&](int64_t t) {
      const float* r = ring.row(t % rows).data();
      return std::pair{r, r + width};
    };
    emitted.push_back({i, block, finish_entry(config, gather(config, block, row_of), block, weights)});
  }
  return emitted;
}

int64_t compressor_page_entries(const CompressorConfig& config) {
  return config.dims == kIndexerDims || config.ratio == 4 ? 64 : 2;
}

int64_t compressor_page_bytes(const CompressorConfig& config) {
  const int64_t entries = compressor_page_entries(config);
  return config.dims == kIndexerDims ? indexer_page_bytes(entries) : model1_page_bytes(entries);
}

void compressor_pack(const CompressorConfig& config, const Eigen::VectorXd& entry, int64_t slot, uint8_t* pool) {
  std::vector<uint16_t> bf16(config.dims);
  for (int k = 0; k < config.dims; ++k) bf16[k] = double_to_bf16(entry(k));
  const int64_t per_page = compressor_page_entries(config);
  uint8_t* page = pool + slot / per_page * compressor_page_bytes(config);
  if (config.dims == kIndexerDims) indexer_pack_entry(bf16.data(), per_page, slot % per_page, page);
  else model1_pack_token(bf16.data(), per_page, slot % per_page, page);
}

}  // namespace dsv4h::reference
