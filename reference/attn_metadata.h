// CPU reference of the attention metadata of one forward step (spec 6.2) and of its partial-batch
// copy into a captured graph's buffers with the tail reset to safe padding (spec 6.3, 6.4;
// review findings 1 and 2). Every query token is its own row (spec 6.1); all values are int32.
#pragma once

#include <Eigen/Dense>
#include <array>
#include <cstdint>

namespace dsv4h::reference {

using IndexMatrix = Eigen::Matrix<int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr int64_t kPageSize = 256;   // full-cache page (asserted by the backend)
constexpr int64_t kSwaWindow = 128;  // swa_page_indices columns

// The inputs of one step, as an engine holds them.
struct StepInputs {
  IndexMatrix req_to_token;      // [pool, ctx]: full slot of every position of every request slot
  IndexMatrix full_to_swa;       // [full slots, 1]: SWA slot of every full slot
  IndexMatrix req_pool_indices;  // [>= num_reqs, 1]
  IndexMatrix seq_lens;          // [>= num_reqs, 1]: kv length after this step's tokens
  IndexMatrix extend_lens;       // [>= num_reqs, 1]: tokens of this step (decode 1, verify num_draft)
  IndexMatrix out_cache_loc;     // [>= query rows, 1]: full slot each query row writes
  int64_t num_reqs = 0;          // the real requests; rows beyond belong to nobody
  int64_t row_repeat = 1;        // draft decode: topk rows per token, request-major
};

// Every field is a matrix: per-row scalars have one column.
struct AttnMetadata {
  IndexMatrix page_table, raw_out_loc, seq_lens_casual, positions_casual, swa_page_indices,
      swa_topk_lengths, c4_out_loc, c4_positions, c4_topk_lengths_raw, c4_topk_lengths_clamp1,
      c4_sparse_topk_lengths, c4_sparse_page_indices, c128_out_loc, c128_positions,
      c128_topk_lengths_clamp1, c128_page_indices;
  int64_t rows() const { return raw_out_loc.rows(); }
};

// A field's name, its member, and the value a padding row holds (spec 6.4): out locations 0,
// seq_lens 1, positions 0, lengths 1, raw c4 length 0, index arrays -1. page_table pads with page 0,
// the write sink every pool keeps (spec 5.2): in bounds for a kernel that reads column 0 of a row.
struct MetadataField {
  const char* name;
  IndexMatrix AttnMetadata::*member;
  int32_t padding;
};
extern const std::array<MetadataField, 16> kMetadataFields;

// Column counts that depend on the longest sequence the metadata is built for.
struct MetadataWidths {
  int64_t page_cols;   // ceil(max_seq_len / 256)
  int64_t c128_cols;   // 2 * page_cols rounded up to a multiple of 64 (FlashMLA needs % 64)
  int64_t index_topk;  // c4_sparse_page_indices columns (512 or 1024)
  static MetadataWidths for_seq_len(int64_t max_seq_len, int64_t index_topk);
};

// Columns of a field at these widths (1 for the per-row scalars).
int64_t field_columns(const MetadataField& field, const MetadataWidths& widths);

// Query rows of a step: sum of extend_lens over the real requests, times row_repeat.
int64_t query_rows(const StepInputs& in);

// The metadata of the real rows (query_rows of them). Throws std::invalid_argument naming the
// value when an index or length is out of range.
AttnMetadata build_attn_metadata(const StepInputs& in, const MetadataWidths& widths);

// `rows` rows of padding.
AttnMetadata padding_metadata(int64_t rows, const MetadataWidths& widths);

// Copies rows [0, temp.rows()) and columns [0, temp width) of every field into `buffers` and
// resets everything else (tail rows, and columns beyond a narrower temp) to the padding values.
// Throws std::invalid_argument when temp has more rows or a wider field than the buffers.
void copy_into(AttnMetadata& buffers, const AttnMetadata& temp);

}  // namespace dsv4h::reference
