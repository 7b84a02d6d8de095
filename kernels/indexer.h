// Launch wrappers of the C4 lightning indexer (spec 3.3, 4.2; issue 29): the query's rope, Hadamard
// rotation and fp8 quantisation (indexer_query.hip), the scores of one query row per request over
// its C4 pages of the fp8 indexer cache (indexer_logits.hip; on NVIDIA its tensor-core kernel,
// indexer_logits_mma.hip), the top-k of topk_transform_512
// (indexer_topk.hip) and the translation of its raw indices to C4 page slots (indexer_page_slots.hip).
// Each wrapper throws std::invalid_argument naming the field on impossible sizes and enqueues its
// kernel on `stream`, without a host sync (graph-capturable).
#pragma once

#include <cstdint>

#include "portability.h"

namespace dsv4h {

constexpr int kIndexerMaxHeads = 64;
constexpr int kIndexerC4PageEntries = 64;  // entries per C4 page; a page is 64 * 132 bytes

// The C4 entries a row at `position` sees (spec 3.3: j < (position + 1) / 4), at most `width`: the
// one count of the scoring and top-k kernels (their masks must agree) and of bench_indexer's
// shapes. The reference counts its own (reference/indexer.h, c4_visible): it shares no code with
// what it checks.
__host__ __device__ inline int64_t indexer_visible_entries(int64_t position, int64_t width) {
  const int64_t v = (position + 1) / 4;
  return v < width ? v : width;
}

struct IndexerQueryArgs {
  const uint16_t* q;          // [rows, heads, 128] bf16 bits, as projected (before rope)
  const int32_t* positions;   // [rows] token positions
  uint8_t* q_fp8;             // [rows, heads, 128] e4m3 codes of the rotated query / scale
  float* q_scale;             // [rows, heads] the power-of-two scale of each (row, head)
  float* q_fp8_values;        // optional [rows, heads, 128]: the codes' values as f32 (for comparison)
  double freqs[32];           // the layer's rope frequencies (reference/rope.h's table)
  int64_t rows;
  int64_t heads;
};
void launch_indexer_query(const IndexerQueryArgs& args, hipStream_t stream);

struct IndexerLogitsArgs {
  const uint8_t* q_fp8;        // [rows, heads, 128] e4m3 codes
  const float* q_scale;        // [rows, heads]
  const float* weights;        // [rows, heads] w_h (weights_proj output times 128^-0.5 64^-0.5)
  const int32_t* positions;    // [rows]: a row sees the entries j < (position + 1) / 4
  const int32_t* page_table;   // [rows, pages] C4 page ids of each row's entries 64i .. 64i + 63
  const uint8_t* cache;        // [pool_pages, 64 * 132] the indexer K cache (spec 4.2)
  float* logits;               // [rows, pages * 64]: scores, -inf where masked
  int64_t rows;
  int64_t heads;
  int64_t pages;               // page_table columns; the logits' width is pages * 64
  int64_t pool_pages;
};
// The scores with this platform's kernel: the tensor-core one on NVIDIA, the fp32 FMA one elsewhere.
void launch_indexer_logits(const IndexerLogitsArgs& args, hipStream_t stream);
// Each kernel by name (the GPU tests and benchmarks compare them), and the checks both make.
void launch_indexer_logits_fma(const IndexerLogitsArgs& args, hipStream_t stream);
#if defined(DSV4H_GPU_NVIDIA)
void launch_indexer_logits_mma(const IndexerLogitsArgs& args, hipStream_t stream);
#endif
void validate_indexer_logits(const IndexerLogitsArgs& args);

struct IndexerTopkArgs {
  const float* logits;       // [rows, width]
  const int32_t* positions;  // [rows]
  int32_t* indices;          // [rows, topk] raw entry indices in index order; -1 past the visible entries
  int64_t rows;
  int64_t width;
  int64_t topk;
};
void launch_indexer_topk(const IndexerTopkArgs& args, hipStream_t stream);

struct IndexerPageSlotsArgs {
  const int32_t* indices;     // [rows, topk] raw entry indices or -1
  const int32_t* page_table;  // [rows, pages]
  int32_t* page_slots;        // [rows, topk] page_table[r, i / 64] * 64 + i % 64, -1 kept
  int64_t rows;
  int64_t topk;
  int64_t pages;
};
void launch_indexer_page_slots(const IndexerPageSlotsArgs& args, hipStream_t stream);

}  // namespace dsv4h
