// attn_metadata on the GPU: the per-step update (the build into the staging set and the copy into the
// graph buffer set with the tail reset, one launch), then the consumer gather; the counts are read
// on the device.
#include <string>

#include "../../kernels/attn_metadata.h"
#include "launchers.h"

namespace dsv4h {
namespace {

// The output set whose names start with `prefix` ("" for the graph buffers, "temp_" for staging);
// without `fields`, its sizes alone (a staging set the update does not write).
AttnMetadataBuffers buffers_of(DeviceTensorMap& outputs, const std::string& prefix, bool fields = true) {
  const auto field = [&](const char* name) { return fields ? outputs.data<int32_t>(prefix + name) : nullptr; };
  AttnMetadataBuffers b{field("page_table"), field("raw_out_loc"), field("seq_lens_casual"), field("positions_casual"),
                        field("swa_page_indices"), field("swa_topk_lengths"), field("c4_out_loc"), field("c4_positions"),
                        field("c4_topk_lengths_raw"), field("c4_topk_lengths_clamp1"), field("c4_sparse_topk_lengths"),
                        field("c4_sparse_page_indices"), field("c128_out_loc"), field("c128_positions"),
                        field("c128_topk_lengths_clamp1"), field("c128_page_indices"), 0, 0, 0, 0};
  b.rows = outputs.at(prefix + "raw_out_loc").shape[0];
  b.page_cols = outputs.at(prefix + "page_table").shape[1];
  b.c128_cols = outputs.at(prefix + "c128_page_indices").shape[1];
  b.index_topk = outputs.at(prefix + "c4_sparse_page_indices").shape[1];
  return b;
}

}  // namespace

void launch_attn_metadata_update(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs,
                                 void* stream) {
  const hipStream_t s = static_cast<hipStream_t>(stream);
  const int64_t mode = c.integer("mode");  // 0 decode, 1 prefill, 2 target verify, 3 draft decode
  AttnMetadataUpdateArgs update{};
  update.req_to_token = inputs.data<const int32_t>("req_to_token");
  update.pool = inputs.at("req_to_token").shape[0];
  update.ctx = inputs.at("req_to_token").shape[1];
  update.full_to_swa = inputs.data<const int32_t>("full_to_swa");
  update.full_slots = inputs.at("full_to_swa").shape[0];
  update.req_pool_indices = inputs.data<const int32_t>("req_pool_indices");
  update.seq_lens = inputs.data<const int32_t>("seq_lens");
  update.extend_lens = inputs.data<const int32_t>("extend_lens");
  update.out_cache_loc = inputs.data<const int32_t>("out_cache_loc");
  update.num_reqs = inputs.data<const int32_t>("num_reqs");
  update.max_reqs = inputs.at("seq_lens").shape[0];
  update.tokens_per_request = mode == 1 ? 0 : mode == 2 ? c.integer("extend") : 1;
  update.row_repeat = mode == 3 ? c.integer("topk") : 1;
  update.staging = buffers_of(outputs, "temp_", c.integer("temp") == 1);
  update.num_rows = outputs.data<int32_t>("temp_num_rows");
  update.buffers = buffers_of(outputs, "");
  launch_attn_metadata_update(update, s);
}

void launch_attn_metadata_case(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream) {
  launch_attn_metadata_update(c, inputs, outputs, stream);
  SwaGatherArgs gather{};
  gather.swa_page_indices = outputs.data<const int32_t>("swa_page_indices");
  gather.swa_topk_lengths = outputs.data<const int32_t>("swa_topk_lengths");
  gather.swa_kv = inputs.data<const int32_t>("swa_kv");
  gather.swa_slots = inputs.at("swa_kv").shape[0];
  gather.gathered = outputs.data<int32_t>("swa_gathered");
  gather.rows = outputs.at("swa_gathered").shape[0];
  launch_swa_gather(gather, static_cast<hipStream_t>(stream));
}

}  // namespace dsv4h
