// CPU reference of DeepSeek-V4's KV compressor (spec 3.2, 4.3, 9.1) in fp64: one entry per `ratio`
// tokens, pooled per channel by a softmax over the block's scores, then RMSNorm, RoPE at the
// block's first position (YaRN table of compressed layers), for the indexer key a Hadamard
// rotation, and the pack into the pool (584-byte MODEL1 entries; 132-byte indexer entries).
//
// Ratio 4 overlaps two series: a token's kv and score rows hold 2d channels, the first half ("Ca")
// feeding the next block's entry and the second ("Cb") its own block's. Entry j pools the Ca
// halves of block j-1 with the Cb halves of block j; for j = 0 the Ca half is absent (score -inf).
// Ratio 128 pools the 128 tokens of its block, d channels each.
//
// Two forms that must agree bit for bit: the dense closed form over a whole sequence, and the
// state machine (chunked prefill, decode), whose state is a ring of the request's latest rows.
// Both gather the same candidates in the same order and share the pooling, so any difference is in
// which values they gather: the bug under test.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <vector>

namespace dsv4h::reference {

// The compressor bugs of issue 29 the harness must catch, as the reference computes them, so a CPU
// test shows that the verify cases tell each from the right math.
enum class CompressorBug {
  none,
  overlap_half_missing,    // ratio 4: block j-1's Ca half not mixed in
  absent_half_zero_score,  // ratio 4, j = 0: the absent half takes score 0 (kv 0) instead of -inf
  rope_last_position,      // rope at the block's last position instead of its first
  emission_late,           // emission when (seq_len + 1) % ratio == 0 instead of seq_len % ratio == 0
  chunk_state_dropped,     // a chunk starting inside a block starts from a clean state
};

struct CompressorConfig {
  int ratio = 4;   // 4 (two overlapping series) or 128
  int dims = 512;  // d: 512 for the main latent, 128 for the indexer key (ratio 4 only)
  CompressorBug bug = CompressorBug::none;
};

using RowMatrixXf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr double kCompressorNormEps = 1e-6;

int compressor_series(int ratio);          // coff: 2 for ratio 4, 1 for ratio 128
int compressor_ring_rows(int ratio);       // the state ring: 8 for ratio 4, 128 for ratio 128

// Throws std::invalid_argument unless ratio is 4 or 128, dims 512 or 128, and dims 128 only with
// ratio 4 (the indexer exists on ratio-4 layers only).
void check_compressor_config(const CompressorConfig& config);

struct CompressorWeights {
  RowMatrixXf ape;              // [ratio, coff d]: added to the token's score row by position % ratio
  Eigen::VectorXd norm_weight;  // [d]
};

// The score row the pooling and the state use: S_t = score_t + ape[t % ratio], one fp32 addition
// (spec 3.2 computes it in fp32), the same in every path.
float compressor_state_score(float score, float ape);

// Dense closed form over one sequence of T tokens: kv and score [T, coff d] (score without ape).
// Returns the T / ratio entries [T / ratio, d] after norm, rope (and rotation for d = 128), in fp64.
// Sees only the bugs of the math (overlap, absent half, rope position).
Eigen::MatrixXd compress_dense(const CompressorConfig& config, const RowMatrixXf& kv, const RowMatrixXf& score,
                               const CompressorWeights& weights);

// A request's state: ring row r holds [kv | S] of the latest processed token at a position ≡ r
// (mod ring rows), as SGLang's paged ring (spec 4.3) with the request's own ring. A clean row is
// kv 0, score -inf.
RowMatrixXf compressor_clean_ring(const CompressorConfig& config);

struct CompressorEmission {
  int64_t token = 0;  // the index, within the step's tokens, of the token whose processing emitted it
  int64_t block = 0;  // j
  Eigen::VectorXd value;  // [d] after norm, rope (and rotation)
};

// One step of one request: tokens start .. start + n - 1 (kv and score [n, coff d]) processed in
// order, each writing its ring row and, when it completes a block, emitting that block's entry
// from the ring. Prefill is start = 0; decode n = 1; chunked prefill any split.
std::vector<CompressorEmission> compress_extend(const CompressorConfig& config, RowMatrixXf& ring, int64_t start,
                                                const RowMatrixXf& kv, const RowMatrixXf& score,
                                                const CompressorWeights& weights);

// The pool an entry goes to: tokens (entries) per page and bytes per page. MODEL1 pages of 64 (C4)
// or 2 (C128) entries for d = 512 (spec 4.1); indexer pages of 64 entries for d = 128 (spec 4.2).
int64_t compressor_page_entries(const CompressorConfig& config);
int64_t compressor_page_bytes(const CompressorConfig& config);

// Rounds the entry to bf16 once and packs it into slot `slot` of `pool` (pages of the above).
void compressor_pack(const CompressorConfig& config, const Eigen::VectorXd& entry, int64_t slot, uint8_t* pool);

}  // namespace dsv4h::reference
