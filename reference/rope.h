// RoPE and its YaRN frequency table (spec 2.4), in fp64: shared by the compressor, the indexer, the
// sparse attention's inverse rope and the model forward, which must all use one table per layer.
#pragma once

#include <Eigen/Dense>
#include <cstdint>

namespace dsv4h::reference {

constexpr int kRopeDim = 64;  // the rope slice: the last 64 channels of a head

struct RopeConfig {
  double base = 10000;
  bool yarn = false;  // frequency-only YaRN: original_seq_len 65536, factor 16, beta_fast 32, beta_slow 1
};

// A layer's rope by its compress ratio: ratio 0 is base 1e4 without YaRN; ratios 4 and 128 are
// base 1.6e5 with YaRN (the layer's compressor and indexer use the same table).
RopeConfig rope_for_ratio(int64_t compress_ratio);

// f_i for the 32 channel pairs, YaRN applied where configured.
Eigen::VectorXd rope_frequencies(const RopeConfig& config);

// Rotates the interleaved pairs (2i, 2i+1) of `x` (kRopeDim values) by pos * f_i, or by its
// conjugate when `inverse`.
void apply_rope(Eigen::Ref<Eigen::VectorXd> x, int64_t pos, const Eigen::VectorXd& freqs, bool inverse = false);

}  // namespace dsv4h::reference
