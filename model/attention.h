// The attention of one layer (spec 3) in fp64, as small functions with one seam each. The
// indexer's scores, top-k and Hadamard rotation are the indexer component's reference
// (reference/indexer.h); the compressor's and the attention's are still the model's own, to be
// checked against or replaced by their components' references:
//   compress_entry + finish_entry   <->  reference/compressor.h   (spec 3.2)
//   attend                          <->  reference/sparse_attention.h (spec 3.4)
// and the cached latent's FP8 quantise-dequantise is the MODEL1 cache's own pack and unpack
// (reference/kv_cache_model1.h, spec 4.1), so what attention reads is what the cache holds.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/op_observer.h"
#include "model/weights.h"

namespace dsv4h::model {

// The latent as the cache holds it: rounded to bf16, then the 448 nope dims through the MODEL1
// FP8 pack and unpack (7 tiles of 64, ue8m0 scales), the 64 rope dims bf16 as stored.
Eigen::VectorXd cache_qdq(const Eigen::VectorXd& latent);

// The indexer's quantisation (spec 3.3, 3.5): a normalised Walsh-Hadamard transform over 128 dims,
// and FP4 e2m1 quantise-dequantise in blocks of 32 with ue8m0 scales.
Eigen::VectorXd hadamard128(const Eigen::VectorXd& x);
Eigen::VectorXd fp4_qdq(const Eigen::VectorXd& x);

// The pooled entry of one compressed block (spec 3.2, before its norm): per channel, a softmax over
// the candidates' scores of their kv. `prev_*` are the rows (kv, score; score already holds ape) of
// the block before (C4's overlap: their first d channels; empty for block 0 or for C128),
// `cur_*` the block's own rows (C4: their last d channels; C128: all).
Eigen::VectorXd compress_entry(const std::vector<Eigen::VectorXd>& prev_kv, const std::vector<Eigen::VectorXd>& prev_score,
                               const std::vector<Eigen::VectorXd>& cur_kv, const std::vector<Eigen::VectorXd>& cur_score,
                               int64_t ratio, int64_t d);

enum class EntryKind { Main, Indexer };
// RMSNorm, rope of the last 64 dims at the block's first position, then the main cache's FP8
// quantisation or the indexer's Hadamard + FP4 (when `indexer_fp4`).
Eigen::VectorXd finish_entry(const Eigen::VectorXd& raw, const Eigen::VectorXd& norm_weight, double eps,
                             int64_t block_position, const Eigen::VectorXd& freqs, EntryKind kind, bool indexer_fp4);

// The lightning indexer's choice for one query (spec 3.3): q_heads [index_head_dim, n_heads] (rotated
// and quantised), head_weights [n_heads] (scaled), keys the indexer entries of which the first
// `visible` count; the top min(topk, visible) by score, ties to the lower index, in ascending order.
std::vector<int64_t> index_select(const Eigen::MatrixXd& q_heads, const Eigen::VectorXd& head_weights,
                                  const std::vector<Eigen::VectorXd>& keys, int64_t visible, int64_t topk);

// One query's sparse attention with the sink (spec 3.4): q [512, H], keys the candidate latents
// (K == V), sink [H]; returns o [512, H] before the inverse rope. No key gives 0.
Eigen::MatrixXd attend(const Eigen::MatrixXd& q, const std::vector<const Eigen::VectorXd*>& keys, const Eigen::VectorXd& sink);

// A compressor's rows not yet pooled: for C4 the last complete block (its first half feeds the next
// entry) and the block in progress; for C128 the block in progress.
struct CompressorState {
  std::vector<Eigen::VectorXd> prev_kv, prev_score, cur_kv, cur_score;
};

// One attention layer's cache for one request.
struct LayerCache {
  std::vector<Eigen::VectorXd> latents;     // by position: the cached (quantised) latent
  std::vector<Eigen::VectorXd> compressed;  // main compressed entries, by block
  std::vector<Eigen::VectorXd> index_keys;  // the indexer's entries (C4 layers)
  CompressorState main_state, index_state;
};

struct AttentionOptions {
  bool indexer_fp4 = true;  // the official kernels' FP4 simulation of the indexer's q and keys
};

// The attention sub-layer of layer `layer` (weights under `prefix`, "layers.L.attn." or
// "mtp.M.attn.") over new tokens x [T, dim] at positions cache.latents.size() onward: a prefill of
// any T from an empty cache, or a decode of one token. Returns [T, dim]. Its ops, reported to
// `observer` under prefix + "wq_a", "q_norm", "wq_b", "q_rope", "wkv", "kv_norm", "kv_cache" (the
// cached latents), "compress" (the new compressed entries), "indexer.compress", "indexer.q",
// "indexer.weights", "index_select" (C4), "attend" (after the inverse rope), "wo_a" and "wo_b".
RowMatrix attention_forward(const ModelConfig& config, const Weights& weights, int64_t layer, const std::string& prefix,
                            const RowMatrix& x, LayerCache& cache, const AttentionOptions& options,
                            OpObserver* observer = nullptr);

}  // namespace dsv4h::model
