// Launch wrappers of the attention metadata of one step (spec 6.2) together with its copy into a
// captured graph's buffer set with the tail reset (spec 6.4), plus the consumer a layer would run
// (a gather through swa_page_indices). All int32; every size explicit; the real counts are device
// data so that the sequence can be captured once and replayed at any batch size.
#pragma once

#include <cstdint>

#include "portability.h"

namespace dsv4h {

// One set of metadata buffers: `rows` rows of every field, row-major.
struct AttnMetadataBuffers {
  int32_t *page_table, *raw_out_loc, *seq_lens_casual, *positions_casual, *swa_page_indices, *swa_topk_lengths,
      *c4_out_loc, *c4_positions, *c4_topk_lengths_raw, *c4_topk_lengths_clamp1, *c4_sparse_topk_lengths,
      *c4_sparse_page_indices, *c128_out_loc, *c128_positions, *c128_topk_lengths_clamp1, *c128_page_indices;
  int64_t rows;
  int64_t page_cols;   // page_table columns: ceil(max_seq_len / 256)
  int64_t c128_cols;   // c128_page_indices columns: 2 * page_cols rounded up to 64
  int64_t index_topk;  // c4_sparse_page_indices columns
};

// The per-step update, one launch: builds the rows of the real requests into `staging` (rows
// beyond them are not written), writes their count to *num_rows, and writes every row of
// `buffers`: rows [0, min(*num_rows, buffers.rows)) get the staging rows of the same index
// (columns beyond a narrower staging field become padding), the rest the padding of spec 6.4.
// Rows are request-major, token order, each token row_repeat times. The counts are read on the
// device: no host synchronisation, so the launch is captured once and replayed at any batch size.
// A staging set whose field pointers are all null is not written: a replay's update builds straight
// into the buffers (the same values), and staging's rows and widths still give out_cache_loc's
// rows and the step's widths.
struct AttnMetadataUpdateArgs {
  const int32_t* req_to_token;      // [pool, ctx]
  int64_t pool, ctx;
  const int32_t* full_to_swa;       // [full_slots]
  int64_t full_slots;
  const int32_t* req_pool_indices;  // [max_reqs]
  const int32_t* seq_lens;          // [max_reqs]: kv length after this step
  const int32_t* extend_lens;       // [max_reqs]: tokens of this step; read only when tokens_per_request is 0
  const int32_t* out_cache_loc;     // [staging.rows]
  const int32_t* num_reqs;          // device scalar: the real requests, clamped to [0, max_reqs]
  int64_t max_reqs;
  int64_t tokens_per_request;       // decode 1, target verify num_draft; 0 = per request from extend_lens (prefill)
  int64_t row_repeat;               // draft decode: topk; else 1
  AttnMetadataBuffers staging;
  int32_t* num_rows;                // device scalar written: the real rows (at most staging.rows)
  AttnMetadataBuffers buffers;      // the graph's set: no field narrower than its staging field
};

// The consumer: gathered[row][k] = swa_kv[swa_page_indices[row][k]] for k < swa_topk_lengths[row]
// and a slot in [0, swa_slots), else 0.
struct SwaGatherArgs {
  const int32_t* swa_page_indices;  // [rows, 128]
  const int32_t* swa_topk_lengths;  // [rows]
  const int32_t* swa_kv;            // [swa_slots]
  int64_t swa_slots;
  int32_t* gathered;                // [rows, 128]
  int64_t rows;
};

// Each throws std::invalid_argument naming the field on impossible sizes, and enqueues one kernel.
void launch_attn_metadata_update(const AttnMetadataUpdateArgs& args, hipStream_t stream);
void launch_swa_gather(const SwaGatherArgs& args, hipStream_t stream);

}  // namespace dsv4h
