// The host side of the model's batched decode (issue 31; spec 6.3, 6.4): which captured bucket a
// batch replays, where each request's tokens live in the batch's shared pools, and one step's
// per-row inputs as the graph's input buffers hold them (the real rows, then padding rows whose
// outputs are ignored). The GPU side (model/gpu/decode_graph.h) builds the step's metadata from
// these on the device; nothing here runs inside a captured graph.
#pragma once

#include <cstdint>
#include <vector>

namespace dsv4h::model {

constexpr int64_t kFullPageTokens = 256;  // spec 4.1, 6.2: the full pool's page

// The buckets captured for batches of up to max_batch requests: 1, 2, 4, 8, then multiples of 8,
// the last max_batch itself. std::invalid_argument for max_batch < 1.
std::vector<int64_t> decode_buckets(int64_t max_batch);

// The smallest bucket holding n rows; std::invalid_argument naming n where none does.
int64_t bucket_for(const std::vector<int64_t>& buckets, int64_t n);

// The shared pools of a batch (spec 5.2, 6.2): request slot q's position p at full slot
// (first_page(q) + p / 256) * 256 + p % 256, page 0 every pool's sink. The SWA pool is the full pool
// (full_to_swa is the identity), and C4 entry j (C128 entry j) of slot q is at C4 page
// first_page(q) + j / 64 (C128 page first_page(q) + j / 2): the page numbers of every pool agree,
// which is what the metadata's page_table, c4_out_loc and c128_page_indices assume.
struct SharedPoolLayout {
  int64_t requests = 0;  // request slots
  int64_t ctx = 0;       // req_to_token columns: a multiple of 256 (MAX_SEQ_LEN_FOR_CAPTURE)

  // Slots for `requests` requests of up to max_tokens tokens each; std::invalid_argument naming
  // the value where either is < 1.
  static SharedPoolLayout for_requests(int64_t requests, int64_t max_tokens);
  int64_t pages_per_request() const { return ctx / kFullPageTokens; }
  int64_t full_pages() const { return 1 + requests * pages_per_request(); }
  int64_t first_page(int64_t request) const { return 1 + request * pages_per_request(); }
  // std::out_of_range naming the request or position outside the layout.
  int32_t full_slot(int64_t request, int64_t position) const;
  // [requests, ctx] row-major: every position's full slot.
  std::vector<int32_t> req_to_token() const;
};

// One real row of a decode step: its request slot, the position of its token, the token, and the
// next token (the MTP block's input; -1 where there is none: the request's last token).
struct DecodeRow {
  int64_t request = 0, position = 0, token = 0, next_token = -1;
};

// A step's per-row inputs at the bucket's size: rows [0, real) from the real rows in order, rows
// [real, bucket) padding (spec 6.4): token 0, next token 0, request slot 0, seq_len 1, out location
// 0 (the sink), extend 0 and ring 0 (the compressor processes no token and writes only the
// padding's ring). The whole bucket is copied into the graph's buffers each replay, so no tail row
// keeps a value of an earlier replay.
struct DecodeStepInputs {
  int64_t real = 0;
  std::vector<int32_t> tokens, next_tokens, req_pool_indices, seq_lens, out_cache_loc, extend_lens, ring_index;
};

// std::invalid_argument naming the row where it does not fit the layout or the bucket is too small.
DecodeStepInputs decode_step_inputs(const std::vector<DecodeRow>& rows, int64_t bucket, const SharedPoolLayout& layout);

}  // namespace dsv4h::model
