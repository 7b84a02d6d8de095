// The batched decode's driver (decode_graph.h): the shared pools and each request's view of them,
// the buckets (buffers, warm-up, capture), a step's inputs copied in, the steps of a plan.
#include "decode_graph.h"

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>

#include "harness/gpu/device_tensor.h"
#include "kernels/compressor.h"
#include "kernels/sparse_attention.h"
#include "reference/attn_metadata.h"
#include "reference/compressor.h"
#include "reference/kv_cache_model1.h"

namespace dsv4h::model::gpu {

DecodeBucket::~DecodeBucket() {
  if (exec) (void)hipGraphExecDestroy(exec);
  if (graph) (void)hipGraphDestroy(graph);
}

void* DecodeBucket::take_bytes(size_t bytes) {
  if (cursor_ == arena_.size()) arena_.emplace_back(bytes);  // refused while a capture is open: named
  DeviceBytes& d = arena_[cursor_++];
  if (d.bytes() != bytes)
    fail("decode step: buffer " + std::to_string(cursor_ - 1) + " of " + std::to_string(bytes) + " bytes, " +
         std::to_string(d.bytes()) + " in the step's first run (the launch sequence changed between runs)");
  return d.data();
}

float* DecodeBucket::split_scratch(int64_t rows_x_heads, int64_t& floats) {
  floats = rows_x_heads * sparse_attention_row_splits(std::numeric_limits<int32_t>::max()) * 514;
  if (!split_scratch_.data()) split_scratch_ = DeviceBytes(static_cast<size_t>(floats) * sizeof(float));
  if (split_scratch_.bytes() != static_cast<size_t>(floats) * sizeof(float))
    fail("decode step: split scratch of " + std::to_string(floats) + " floats, " +
         std::to_string(split_scratch_.bytes() / sizeof(float)) + " in the step's first run");
  return split_scratch_.as<float>();
}

namespace {

// `copies` clean rings of a compressor of `ratio` and `dims` (compressor_clean_ring's rows).
std::vector<float> clean_rings(int64_t ratio, int64_t dims, int64_t copies) {
  const reference::RowMatrixXf clean = reference::compressor_clean_ring({static_cast<int>(ratio), static_cast<int>(dims)});
  std::vector<float> rows;
  for (int64_t copy = 0; copy < copies; ++copy)
    for (int64_t r = 0; r < clean.rows(); ++r)
      for (int64_t k = 0; k < clean.cols(); ++k) rows.push_back(clean(r, k));
  return rows;
}

}  // namespace

BatchPools GpuForward::new_batch_pools(const SharedPoolLayout& layout) const {
  BatchPools b;
  b.layout = layout;
  const int64_t pages = layout.full_pages(), rings = layout.requests + 1;
  for (int64_t l = 0; l < c_.n_layers + c_.n_mtp_layers; ++l) {
    SharedLayerPools s;
    s.ratio = c_.compress_ratios[l];
    s.swa = DeviceBytes(static_cast<size_t>(pages * reference::model1_page_bytes(kSwaPageTokens)));
    if (s.ratio != 0) {
      const CompressorPoolPages p = compressor_pool_pages(s.ratio, kDims);
      s.comp_page_entries = p.entries;
      s.comp_page_bytes = p.bytes;
      s.comp = DeviceBytes(static_cast<size_t>(pages * p.bytes));
      s.ring = upload(clean_rings(s.ratio, kDims, rings));
      s.ring_out = upload(clean_rings(s.ratio, kDims, rings));
    }
    if (s.ratio == 4) {
      s.index = DeviceBytes(static_cast<size_t>(pages * kC4PageEntries * kIndexerEntryBytes));
      s.index_ring = upload(clean_rings(4, kIndexDims, rings));
      s.index_ring_out = upload(clean_rings(4, kIndexDims, rings));
    }
    b.layers.push_back(std::move(s));
  }
  b.req_to_token = upload(layout.req_to_token());
  std::vector<int32_t> identity(static_cast<size_t>(b.full_slots()));
  for (size_t i = 0; i < identity.size(); ++i) identity[i] = static_cast<int32_t>(i);
  b.full_to_swa = upload(identity);
  return b;
}

LayerState GpuForward::request_view(BatchPools& pools, int64_t layer, int64_t request) const {
  const SharedLayerPools& s = pools.layers[static_cast<size_t>(layer)];
  LayerState v;
  v.ratio = s.ratio;
  v.first_page = pools.layout.first_page(request);
  v.ring_slot = 1 + request;
  v.swa_pages = v.comp_pages = v.index_pool_pages = pools.layout.full_pages();
  v.comp_page_entries = s.comp_page_entries;
  v.comp_page_bytes = s.comp_page_bytes;
  v.c4_pages = pools.layout.pages_per_request();
  v.swa = DeviceBytes::view(s.swa);
  if (s.ratio != 0) v.comp = DeviceBytes::view(s.comp), v.ring = DeviceBytes::view(s.ring), v.ring_out = DeviceBytes::view(s.ring_out);
  if (s.ratio == 4)
    v.index = DeviceBytes::view(s.index), v.index_ring = DeviceBytes::view(s.index_ring),
    v.index_ring_out = DeviceBytes::view(s.index_ring_out);
  return v;
}

void GpuForward::set_inputs(DecodeBucket& b, const DecodeStepInputs& in) const {
  // The whole bucket, padding rows included: no row keeps an earlier step's values (spec 6.4).
  const auto copy = [&](DeviceBytes& d, const std::vector<int32_t>& rows) {
    if (static_cast<int64_t>(rows.size()) != b.rows()) fail("decode step inputs of " + std::to_string(rows.size()) + " rows for bucket " + std::to_string(b.rows()));
    DSV4H_HIP_CHECK(hipMemcpyAsync(d.data(), rows.data(), rows.size() * sizeof(int32_t), hipMemcpyHostToDevice, stream_));
  };
  copy(b.tokens, in.tokens);
  copy(b.next_tokens, in.next_tokens);
  copy(b.req_pool_indices, in.req_pool_indices);
  copy(b.seq_lens, in.seq_lens);
  copy(b.out_cache_loc, in.out_cache_loc);
  copy(b.extend_lens, in.extend_lens);
  copy(b.ring_index, in.ring_index);
  const int32_t real = static_cast<int32_t>(in.real);
  DSV4H_HIP_CHECK(hipMemcpyAsync(b.num_reqs.data(), &real, sizeof(real), hipMemcpyHostToDevice, stream_));
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));  // the host vectors go out of scope
}

std::unique_ptr<DecodeBucket> GpuForward::new_bucket(int64_t rows, const BatchPools& pools,
                                                     const std::function<void(DecodeBucket&)>& step) const {
  auto b = std::make_unique<DecodeBucket>(rows);
  for (DeviceBytes* d : {&b->tokens, &b->next_tokens, &b->req_pool_indices, &b->seq_lens, &b->out_cache_loc, &b->extend_lens,
                         &b->ring_index, &b->swa_out_loc, &b->c4_loc, &b->c128_loc, &b->translation_cache})
    *d = device_array<int32_t>(rows);
  b->num_reqs = device_array<int32_t>(1);
  b->num_rows = device_array<int32_t>(1);
  // The metadata set at the bucket's rows and the layout's widths (spec 6.3: captured at the
  // maximum sequence length).
  const reference::MetadataWidths widths = reference::MetadataWidths::for_seq_len(pools.layout.ctx, c_.index_topk);
  AttnMetadataBuffers& m = b->meta;
  m.rows = rows;
  m.page_cols = widths.page_cols;
  m.c128_cols = widths.c128_cols;
  m.index_topk = widths.index_topk;
  int32_t** fields[] = {&m.page_table, &m.raw_out_loc, &m.seq_lens_casual, &m.positions_casual, &m.swa_page_indices,
                        &m.swa_topk_lengths, &m.c4_out_loc, &m.c4_positions, &m.c4_topk_lengths_raw, &m.c4_topk_lengths_clamp1,
                        &m.c4_sparse_topk_lengths, &m.c4_sparse_page_indices, &m.c128_out_loc, &m.c128_positions,
                        &m.c128_topk_lengths_clamp1, &m.c128_page_indices};
  for (int32_t** f : fields) {
    const int64_t cols = f == &m.page_table ? m.page_cols
                         : f == &m.swa_page_indices ? reference::kSwaWindow
                         : f == &m.c4_sparse_page_indices ? m.index_topk
                         : f == &m.c128_page_indices ? m.c128_cols
                                                       : 1;
    b->meta_fields.push_back(device_array<int32_t>(rows * cols));
    *f = b->meta_fields.back().as<int32_t>();
  }
  // The first run, on padding rows only (stores to the sinks, rings of the padding): it allocates
  // the step's buffers and warms up every library the step calls.
  set_inputs(*b, decode_step_inputs({}, rows, pools.layout));
  step(*b);
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
  if (options_.decode != DecodeMode::batched_graph) return b;
  const std::string what = "graph capture of the model's decode step (bucket " + std::to_string(rows) + ")";
  {
    CaptureScope scope(what);
    DSV4H_HIP_CHECK(hipStreamBeginCapture(stream_, hipStreamCaptureModeGlobal));
    try {
      step(*b);
    } catch (const std::exception& e) {
      hipGraph_t broken = nullptr;
      (void)hipStreamEndCapture(stream_, &broken);
      if (broken) (void)hipGraphDestroy(broken);
      (void)hipGetLastError();
      throw std::runtime_error(what + " failed: " + e.what());
    }
    const hipError_t status = hipStreamEndCapture(stream_, &b->graph);
    if (status != hipSuccess) {
      (void)hipGetLastError();
      throw std::runtime_error(what + " failed at hipStreamEndCapture: " + hipGetErrorName(status) +
                               " (the launch sequence did something that cannot be captured: a host synchronisation, a "
                               "synchronous copy or an allocation)");
    }
  }
  DSV4H_HIP_CHECK(hipGraphInstantiate(&b->exec, b->graph, nullptr, nullptr, 0));
  return b;
}

void GpuForward::require_batched_config() const {
  if (c_.window_size != reference::kSwaWindow)
    throw std::invalid_argument("GPU forward: a batched decode needs window_size " + std::to_string(reference::kSwaWindow) +
                                " (the metadata's swa_page_indices), got " + std::to_string(c_.window_size));
  if (c_.n_mtp_layers != 1)
    throw std::invalid_argument("GPU forward: a batched decode runs exactly one MTP block, the config has " +
                                std::to_string(c_.n_mtp_layers));
}

void GpuForward::run_batched(const RunPlan& plan) const {
  const int64_t R = static_cast<int64_t>(plan.tokens.size());
  if (R > options_.max_batch)
    throw std::invalid_argument("GPU forward: a batched decode of " + std::to_string(R) + " requests, more than max_batch " +
                                std::to_string(options_.max_batch));
  require_batched_config();
  int64_t longest = 0;
  for (const auto& t : plan.tokens) longest = std::max<int64_t>(longest, static_cast<int64_t>(t.size()));
  BatchPools pools = new_batch_pools(SharedPoolLayout::for_requests(R, longest));
  // Each request's prefill on its own, into its pages of the shared pools.
  for (int64_t r = 0; r < R; ++r) {
    RequestPools state;
    for (int64_t l = 0; l < c_.n_layers + c_.n_mtp_layers; ++l) state.layers.push_back(request_view(pools, l, r));
    call(plan, r, 0, state);
  }
  // Then step by step, the requests still running as one batch (a request that finished leaves,
  // the rows after it move up), through the smallest bucket that holds them.
  const std::vector<int64_t> buckets = decode_buckets(options_.max_batch);
  std::map<int64_t, std::unique_ptr<DecodeBucket>> made;
  for (int64_t s = 1;; ++s) {
    std::vector<DecodeRow> rows;
    for (int64_t r = 0; r < R; ++r) {
      if (s >= plan.steps(r)) continue;
      const std::vector<int64_t>& tokens = plan.tokens[static_cast<size_t>(r)];
      const int64_t pos = plan.positions(s).first;
      rows.push_back({r, pos, tokens[static_cast<size_t>(pos)],
                      pos + 1 < static_cast<int64_t>(tokens.size()) ? tokens[static_cast<size_t>(pos + 1)] : -1});
    }
    if (rows.empty()) break;
    const int64_t bucket = bucket_for(buckets, static_cast<int64_t>(rows.size()));
    std::unique_ptr<DecodeBucket>& b = made[bucket];
    if (!b) b = new_bucket(bucket, pools, [&](DecodeBucket& d) { decode_step(d, pools); });
    set_inputs(*b, decode_step_inputs(rows, bucket, pools.layout));
    if (options_.decode == DecodeMode::batched_graph)
      DSV4H_HIP_CHECK(hipGraphLaunch(b->exec, stream_));
    else
      decode_step(*b, pools);
    report_step(*b, pools, rows, s);
  }
}

}  // namespace dsv4h::model::gpu
