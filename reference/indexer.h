// CPU reference of the C4 lightning indexer (spec 3.3, 4.2; issue 29), in fp64: the query path
// (rope on the last 64 dims, the Hadamard rotation, quantisation), the scores over the fp8 indexer
// cache, the causal mask, the top-k of topk_transform_512 and its translation to C4 page slots.
//
// Quantisation of the query is an explicit option (spec U): SGLang stores q as fp8 e4m3 with one
// scale per (token, head), the official kernels fp4-quantise-dequantise it (block 32). The scale
// rule of the fp8 query is the indexer K cache's (kv_cache_indexer.h), 2^ceil(log2(max(amax, 1e-4)
// / 448)); [INF] that SGLang's fused query quantisation uses this power-of-two rule was not read in
// its source: reference and kernel share the rule, so they compare like with like.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <vector>

namespace dsv4h::reference {

constexpr int kIndexerHeadDim = 128;
constexpr int64_t kC4EntriesPerPage = 64;  // a C4 page holds 64 compressed entries (spec 4.2)

enum class IndexerQuant {
  fp8_per_head,  // SGLang: e4m3 codes, one power-of-two scale per (token, head)
  fp4_block32,   // DeepSeek's reference: e2m1 quantise-dequantise, ue8m0 scale per 32 values
};

struct IndexerQuery {
  Eigen::MatrixXd values;       // [heads, 128]: the rotated query as quantised (code * scale)
  std::vector<uint8_t> fp8;     // fp8_per_head: [heads * 128] e4m3 codes; empty for fp4
  std::vector<int> scale_exp;   // fp8_per_head: [heads], head h's scale is 2^scale_exp[h]
};

// x's rows times the 128x128 Sylvester Hadamard matrix, over sqrt(128) ("rotate_activation").
Eigen::MatrixXd hadamard128(const Eigen::MatrixXd& x);

// The query of one token at position `pos`: q [heads, 128] as projected; rope (freqs of
// rope_frequencies, the layer's table) on channels 64..127, the Hadamard rotation, quantisation.
IndexerQuery indexer_query(const Eigen::MatrixXd& q, int64_t pos, const Eigen::VectorXd& freqs, IndexerQuant quant);

// The compressed entries a query at position `pos` sees: j < (pos + 1) / 4.
inline int64_t c4_visible(int64_t pos) { return (pos + 1) / 4; }

// scores(j) = sum_h relu(q_h . k_j) * w_h for j < visible, -inf for visible <= j < keys.rows().
// q [heads, 128] and keys [width, 128] are the dequantised values; weights [heads].
Eigen::VectorXd indexer_scores(const Eigen::MatrixXd& q, const Eigen::VectorXd& weights, const Eigen::MatrixXd& keys,
                               int64_t visible);

// topk_transform_512's raw indices (topk of them): with visible <= topk every entry in order,
// 0..visible-1, then -1; otherwise the topk largest of scores[0, visible), by descending score,
// ties to the lower index (a kernel may break them otherwise: compare as sets).
std::vector<int32_t> indexer_topk(const Eigen::VectorXd& scores, int64_t visible, int64_t topk);

// Raw index -> C4 page slot: page_table_row[raw / entries_per_page] * entries_per_page + raw %
// entries_per_page, -1 kept; BadInput for any other index outside the row's `pages` pages.
std::vector<int32_t> c4_page_slots(const std::vector<int32_t>& raw, const int32_t* page_table_row, int64_t pages,
                                   int64_t entries_per_page = kC4EntriesPerPage);

}  // namespace dsv4h::reference
