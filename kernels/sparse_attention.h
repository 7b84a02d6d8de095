// Launch wrapper of DeepSeek-V4's sparse attention (spec 3.4, 9.2): per query row and head, one
// softmax with the head's sink over the row's window entries and its compressed entries, read from
// MODEL1 FP8 pools (spec 4.1), output bf16 with the rope slice de-rotated, and the lse.
#pragma once

#include <cstdint>

#include "portability.h"

namespace dsv4h {

// One pool and one scope's indices into it (the metadata's swa_page_indices / swa_topk_lengths,
// c4_sparse_page_indices / c4_sparse_topk_lengths or c128_page_indices / c128_topk_lengths_clamp1).
struct SparseAttentionScope {
  const uint8_t* cache = nullptr;  // MODEL1 pages; nullptr: no such scope (ratio-0 layers' extra)
  int64_t tokens_per_page = 0;     // 256 (SWA), 64 (C4), 2 (C128)
  const int32_t* indices = nullptr;  // [rows, width]; -1 = invalid; columns >= the length not read
  int64_t width = 0;
  const int32_t* lengths = nullptr;  // [rows], in [0, width]
};

// bf16 values travel as their raw 16-bit patterns.
struct SparseAttentionArgs {
  const uint16_t* q = nullptr;  // [rows, heads, 512] bf16
  SparseAttentionScope window, extra;
  const float* sink = nullptr;        // [heads]
  const int32_t* positions = nullptr; // [rows]: the rope position the output is de-rotated by
  uint16_t* out = nullptr;            // [rows, heads, 512] bf16
  float* lse = nullptr;               // [rows, heads]; -FLT_MAX for a row with no valid key
  float* scratch = nullptr;           // [rows, heads, splits, 514] where splits > 1 (sparse_attention_splits); else unused
  int64_t scratch_floats = 0;
  int64_t rows = 0;
  int64_t heads = 0;           // a multiple of 16 (64 and 128 in the model)
  int64_t compress_ratio = 0;  // 0, 4 or 128: picks the rope table (spec 2.4)
  float scale = 0.044194173824159216f;  // 512^-0.5
};

// How many blocks share a decode row's keys, a function of the row's own key count only (so that a
// row's result never depends on the batch it is in): one split per 128 keys (two 64-key tiles of
// the tensor-core kernel), at most 8 (the tensor-core kernel's splits are a cluster, 8 the largest
// portable one). The grid has the splits of the widest possible row, window width + extra width; a
// row with fewer keys leaves the extra splits empty. harness/components/sparse_attention.cpp sizes
// the scratch by this rule.
__host__ __device__ inline int64_t sparse_attention_row_splits(int64_t keys) {
  const int64_t splits = (keys + 127) / 128;
  return splits < 1 ? 1 : (splits > 8 ? 8 : splits);
}
inline int64_t sparse_attention_splits(int64_t window_width, int64_t extra_width) {
  return sparse_attention_row_splits(window_width + extra_width);
}

// The rope frequencies of a layer (spec 2.4): f_i, i < 32, of the 64 rope dims' pairs; the kernels
// de-rotate the output's pair i by position * f_i (angles and sin/cos in double).
struct SparseAttentionRope {
  double freqs[32];
};
SparseAttentionRope sparse_attention_rope(int64_t compress_ratio);

// Bytes of one MODEL1 page of `tokens_per_page` entries (584 bytes each), padded to 576 bytes.
inline int64_t sparse_attention_page_bytes(int64_t tokens_per_page) { return (tokens_per_page * 584 + 575) / 576 * 576; }

// The launchers' checks of their arguments (a scratch only where splits > 1): std::invalid_argument
// naming `launcher` and the field; false where there is nothing to launch (no rows).
bool sparse_attention_check_launch(const SparseAttentionArgs& args, int64_t splits, const char* launcher);

// Decode rows. Throws std::invalid_argument (naming the field) on impossible sizes; enqueues one
// kernel on `stream` (on NVIDIA: kernels/sparse_attention_mma.hip, tensor cores, the row's keys
// split over sparse_attention_row_splits blocks merged in their cluster's shared memory or, for
// large grids, through the scratch by the last of them; on AMD: kernels/sparse_attention.hip,
// scalar, a split kernel and a merge kernel through the scratch), no host sync, so it can be
// captured in a graph. On NVIDIA, launches must not overlap on one device (the scratch merge's
// arrival counts are the kernel's own).
void launch_sparse_attention(const SparseAttentionArgs& args, hipStream_t stream);

// The same outputs for many query rows at once (prefill): one block per (row, up to 64 heads) over
// all the row's keys, no scratch (tensor cores on NVIDIA; on AMD the scalar kernel unsplit). Same
// arguments and checks (scratch unused).
void launch_sparse_attention_prefill(const SparseAttentionArgs& args, hipStream_t stream);

}  // namespace dsv4h
