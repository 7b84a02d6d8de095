// The attention of one layer (spec 3) in fp64, as small functions with one seam each. The
// compressor is the compressor component's reference (reference/compressor.h: its dense closed form
// for a prefill, its state machine over a ring for a decode), the indexer's scores, top-k and
// Hadamard rotation the indexer component's (reference/indexer.h), and the cached latent's FP8
// quantise-dequantise the MODEL1 cache's own pack and unpack (reference/kv_cache_model1.h, spec
// 4.1), so what attention reads is what the cache holds. The attention itself is still the
// model's own (attend): reference/sparse_attention.h takes bf16 queries and packed pools, and the
// fp64 model's queries are not rounded to bf16; the attend's op fixture (harness/model/op_fixture.h)
// runs that reference on the op's inputs, and a CPU test shows it gives the model's output.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"
#include "reference/compressor.h"
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

// The lightning indexer's choice for one query (spec 3.3): q_heads [index_head_dim, n_heads] (rotated
// and quantised), head_weights [n_heads] (scaled), keys the indexer entries of which the first
// `visible` count; the top min(topk, visible) by score, ties to the lower index, in ascending order.
std::vector<int64_t> index_select(const Eigen::MatrixXd& q_heads, const Eigen::VectorXd& head_weights,
                                  const std::vector<Eigen::VectorXd>& keys, int64_t visible, int64_t topk);

// One query's sparse attention with the sink (spec 3.4): q [512, H], keys the candidate latents
// (K == V), sink [H]; returns o [512, H] before the inverse rope. No key gives 0.
Eigen::MatrixXd attend(const Eigen::MatrixXd& q, const std::vector<const Eigen::VectorXd*>& keys, const Eigen::VectorXd& sink);

// One attention layer's cache for one request.
struct LayerCache {
  std::vector<Eigen::VectorXd> latents;     // by position: the cached (quantised) latent
  std::vector<Eigen::VectorXd> compressed;  // main compressed entries, by block
  std::vector<Eigen::VectorXd> index_keys;  // the indexer's entries (C4 layers)
  // The compressors' states (reference/compressor.h's rings of the latest rows); empty until used.
  reference::RowMatrixXf main_ring, index_ring;
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
