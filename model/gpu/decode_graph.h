// The GPU forward's batched decode (issue 31; spec 6.2-6.4): one decode step of a batch of requests
// as one launch sequence with no host work inside, run eagerly or captured once per bucket and
// replayed for every batch it holds.
//
// - The requests live in a batch's shared pools (decode_batch.h's SharedPoolLayout): request slot
//   q from page 1 + q * pages in every pool, ring 1 + q in every compressor's rings (page 0 and
//   ring 0 are the sink and the padding's). Each request's prefill runs on its own (the eager
//   forward, through views of its pages: request_view), then its decode steps run in batches.
// - A step's host work is done before its launch sequence: the bucket's input rows (the real rows,
//   then padding rows: decode_step_inputs) copied whole into the bucket's input buffers. Inside,
//   kernels/attn_metadata.h builds every row's metadata from them on the device (the real row
//   count read there too, so the sequence is captured once and replayed at any batch of its
//   bucket), kernels/kv_pool.h translates the store locations once a step, and every layer reads
//   them: the window's and C128's indices from the metadata, C4's from the indexer's top-k through
//   the metadata's page table (launch_indexer_page_slots), as c4_decode_step composes them.
// - Every op writes its own buffer of the bucket (the arena, allocated by the step's first run, a
//   warm-up on padding rows; the capture takes the same buffers in the same order and allocates
//   nothing: an allocation inside fails it by name). So after a step every op's output is still
//   where it wrote it, and the ops are reported then, each real row as its request's call (the
//   reference's names and shapes); the compressed entries a row's token completed are read back
//   from the pools at that time. An observer's change cannot be written back into a finished step:
//   it is an error naming the op (fault injection runs the per-request forward).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "forward_impl.h"
#include "kernels/attn_metadata.h"
#include "model/decode_batch.h"

namespace dsv4h::model::gpu {

// One layer's pools shared by a batch's request slots, and its compressors' rings.
struct SharedLayerPools {
  int64_t ratio = 0, comp_page_entries = 0, comp_page_bytes = 0;
  DeviceBytes swa, comp, index, ring, ring_out, index_ring, index_ring_out;
};

struct BatchPools {
  SharedPoolLayout layout;
  std::vector<SharedLayerPools> layers;  // the main layers, then the MTP block's
  DeviceBytes req_to_token;              // [requests, ctx]
  DeviceBytes full_to_swa;               // the identity: the SWA pool is the full pool
  int64_t full_slots() const { return layout.full_pages() * kFullPageTokens; }
};

// How a step's op is reported for one row: `rows` its outputs' rows of that row; `main_entry` and
// `index_entry` the compressed entry (main latent, indexer key) the row's token completed, none
// where it completed none; `scaled_q` the indexer's fp8 query values times their scales;
// `selection` the indexer's raw top-k as the reference's selection (ascending, -1 after).
enum class StepOpKind { rows, main_entry, index_entry, scaled_q, selection };

struct StepOutput {
  const char* name;
  DeviceView view;  // the bucket's rows
  OpValues values = OpValues::real;
  int64_t rows_per_request = 1;  // hc for the MTP block's hnorm and h_proj
};

struct StepOp {
  std::string name;
  std::vector<StepOutput> outputs;
  StepOpKind kind = StepOpKind::rows;
  int64_t layer = 0;
  bool mtp = false;  // reported only for rows with a next token
};

// A bucket's buffers, the ops its step reports, and its graph.
class DecodeBucket {
 public:
  explicit DecodeBucket(int64_t rows) : rows_(rows) {}
  ~DecodeBucket();
  DecodeBucket(const DecodeBucket&) = delete;
  DecodeBucket& operator=(const DecodeBucket&) = delete;
  int64_t rows() const { return rows_; }

  // The next buffer of the step (n elements); the first run allocates it (zeroed), later runs take
  // the same one. A run asking for another size than the first is a logic error, named.
  template <typename T>
  T* take(int64_t n) {
    return static_cast<T*>(take_bytes(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T)));
  }
  // A buffer holding `values`, uploaded by the first run (before any capture).
  template <typename T>
  const T* constant(const std::vector<T>& values) {
    const bool first = cursor_ == arena_.size();
    T* p = take<T>(static_cast<int64_t>(values.size()));
    if (first && !values.empty()) DSV4H_HIP_CHECK(hipMemcpy(p, values.data(), values.size() * sizeof(T), hipMemcpyHostToDevice));
    return p;
  }
  // The sparse attention's split partials (kernels/sparse_attention.h: [rows, heads, splits, 514]
  // floats) for `rows_x_heads` rows x heads, sized for the most splits a row can have: one buffer
  // for every layer of the step (one a layer was ~0.6 GB at bs 256 and 128 heads). Each layer's
  // launch has merged its partials before the next one starts on the step's stream, and no op
  // reports them. Allocated by the step's first run, as the arena is; `floats` is its size.
  float* split_scratch(int64_t rows_x_heads, int64_t& floats);
  // A new run of the step: the arena from its start, the ops recorded afresh.
  void rewind() {
    cursor_ = 0;
    ops.clear();
    in_mtp = false;
  }
  void record(const std::string& name, std::vector<StepOutput> outputs, StepOpKind kind = StepOpKind::rows, int64_t layer = 0) {
    ops.push_back({name, std::move(outputs), kind, layer, in_mtp});
  }

  // The step's inputs (decode_step_inputs' fields, bucket rows) and the real requests' count.
  DeviceBytes tokens, next_tokens, req_pool_indices, seq_lens, out_cache_loc, extend_lens, ring_index, num_reqs;
  std::vector<DeviceBytes> meta_fields;
  AttnMetadataBuffers meta{};  // the graph's metadata set
  DeviceBytes num_rows, swa_out_loc, c4_loc, c128_loc, translation_cache;
  std::vector<StepOp> ops;
  bool in_mtp = false;
  bool translated = false;  // the model_cached_translation mutant's state
  hipGraph_t graph = nullptr;
  hipGraphExec_t exec = nullptr;

 private:
  void* take_bytes(size_t bytes);
  int64_t rows_;
  std::vector<DeviceBytes> arena_;
  DeviceBytes split_scratch_;
  size_t cursor_ = 0;
};

}  // namespace dsv4h::model::gpu
