// Descriptor of `mtp_expand` (spec 7, review finding 3): per-request metadata rows expanded to the
// bs * topk draft query rows, request-major (repeat_interleave), with the output size from the
// case. `fields=0` expands every per-request field of spec 6.2; `fields=1` only those the draft
// layer reads (it is SWA-only: out location, lengths, position, SWA indices).
// The out locations are repeated like every other field, so with topk > 1 a request's branches
// share one slot; per-branch slots (attn_metadata's draft mode) are what tree drafting would need,
// and V4 forbids topk > 1 for that reason (spec 7's caveat). At topk 1 the two agree.
#include <cstring>
#include <string>
#include <vector>

#include "../../reference/mtp_expand.h"
#include "../descriptor.h"
#include "../errors.h"
#include "../random.h"
#include "index_tensors.h"
#if DSV4H_GPU_LAYER
#include "../../kernels/mtp_expand.h"
#include "../gpu/device_tensor.h"
#endif

namespace dsv4h {
namespace {

using reference::kMetadataFields;
using reference::MetadataField;

enum class FieldSet : int64_t { every = 0, draft_layer = 1 };

struct Params {
  int64_t bs = 8, topk = 2, ctx = 1024, index_topk = 512;
  FieldSet field_set = FieldSet::every;
  template <typename F>
  void fields(F& f) {
    f("bs", bs, "requests");
    f("topk", topk, "draft rows per request");
    f("ctx", ctx, "longest sequence the widths hold (page_table, c128_page_indices)");
    f("index_topk", index_topk, "c4_sparse_page_indices columns");
    f("fields", field_set, "0 every per-request field, 1 the draft layer's (SWA-only)");
  }
};
using MtpCase = CaseOf<Params>;

// The expanded fields: every per-request field or those the draft layer reads.
std::vector<MetadataField> fields_of(FieldSet field_set) {
  if (field_set == FieldSet::every) return {kMetadataFields.begin(), kMetadataFields.end()};
  std::vector<MetadataField> draft;
  for (const MetadataField& f : kMetadataFields)
    for (const char* name : {"raw_out_loc", "seq_lens_casual", "positions_casual", "swa_page_indices", "swa_topk_lengths"})
      if (std::string(f.name) == name) draft.push_back(f);
  return draft;
}

struct Sizes {
  std::vector<MetadataField> fields;
  reference::MetadataWidths widths;
  int64_t row_cols = 0;  // a row's values over the expanded fields
  int64_t cols(const MetadataField& f) const { return reference::field_columns(f, widths); }
};

Sizes sizes_of(const MtpCase& c) {
  const auto bad = [&](const std::string& why) { return BadInput("mtp_expand: " + why + " in " + c.str()); };
  // Each size is bounded before any product of sizes is formed, so that none overflows.
  if (c.bs < 0 || c.bs > (1 << 20)) throw bad("bs must be in [0, 2^20]");
  if (c.topk < 1 || c.topk > (1 << 20)) throw bad("topk must be in [1, 2^20], got " + std::to_string(c.topk));
  if (c.ctx < 1 || c.ctx > (1 << 24)) throw bad("ctx must be in [1, 2^24]");
  if (c.index_topk < 64 || c.index_topk % 64 || c.index_topk > (1 << 24))
    throw bad("index_topk must be a multiple of 64 in [64, 2^24]");
  if (c.field_set != FieldSet::every && c.field_set != FieldSet::draft_layer)
    throw bad("fields must be 0 (all) or 1 (the draft layer's)");
  if (c.bs * c.topk > (1 << 20)) throw bad("bs * topk above 2^20 rows");
  Sizes s;
  s.fields = fields_of(c.field_set);
  s.widths = reference::MetadataWidths::for_seq_len(c.ctx, c.index_topk);
  for (const MetadataField& f : s.fields) s.row_cols += s.cols(f);
  if (c.bs * (1 + c.topk) * s.row_cols > (int64_t{1} << 28))
    throw bad("the rows' fields (bs * (1 + topk) * " + std::to_string(s.row_cols) + " columns) above 2^28 values");
  return s;
}

TensorMap make_inputs(const MtpCase& c) {
  const Sizes s = sizes_of(c);
  Rng rng(c.seed());
  TensorMap inputs;
  for (const MetadataField& f : s.fields) {
    HostTensor t(DType::i32, {c.bs, s.cols(f)});
    fill_integers(t, rng, -1, 1 << 20);
    inputs.emplace(f.name, std::move(t));
  }
  return inputs;
}

void validate_inputs(const MtpCase& c, const TensorMap& inputs) {
  const Sizes s = sizes_of(c);
  std::vector<std::string> names;
  for (const MetadataField& f : s.fields) {
    require_i32("mtp_expand", inputs, f.name, {c.bs, s.cols(f)});
    names.push_back(f.name);
  }
  reject_unknown_inputs("mtp_expand", inputs, names);
}

TensorMap make_outputs(const MtpCase& c) {
  const Sizes s = sizes_of(c);
  TensorMap out;
  for (const MetadataField& f : s.fields) out.emplace(f.name, HostTensor(DType::i32, {c.bs * c.topk, s.cols(f)}));
  return out;
}

void run_reference(const MtpCase& c, const TensorMap& inputs, TensorMap& outputs) {
  for (const MetadataField& f : sizes_of(c).fields)
    write_rows(outputs.at(f.name), reference::repeat_interleave(to_index_matrix(inputs.at(f.name)), c.topk, c.bs * c.topk));
}

// A padded request is a padding row of the metadata (spec 6.4), expanded like any other.
TensorMap pad_batch(const MtpCase& c, const TensorMap& inputs, int64_t bucket) {
  if (bucket < c.bs) throw BadInput("mtp_expand: bucket " + std::to_string(bucket) + " < bs " + std::to_string(c.bs));
  TensorMap padded;
  for (const MetadataField& f : sizes_of(c).fields) {
    const HostTensor& real = inputs.at(f.name);
    HostTensor t(DType::i32, {bucket, real.shape()[1]});
    std::memcpy(t.bytes(), real.bytes(), real.nbytes());
    for (int64_t i = real.numel(); i < t.numel(); ++i) t.data<int32_t>()[i] = f.padding;
    padded.emplace(f.name, std::move(t));
  }
  return padded;
}

WorkCount work(const MtpCase& c, const TensorMap&) {
  // Each input row read once, written topk times.
  return {4.0 * static_cast<double>(sizes_of(c).row_cols * c.bs * (1 + c.topk)), 0};
}

// Requests are independent: requests [begin, end) are the draft rows [begin * topk, end * topk).
BatchSlice slice_batch(const MtpCase& c, const TensorMap& inputs, int64_t begin, int64_t end) {
  BatchSlice slice{c.untyped().with("bs", std::to_string(end - begin)), {}, {}};
  for (const MetadataField& f : sizes_of(c).fields) {
    slice.inputs.emplace(f.name, inputs.at(f.name).rows(begin, end));
    slice.output_rows.emplace(f.name, begin * c.topk);
  }
  return slice;
}

#if DSV4H_GPU_LAYER
// Every field of the case in one launch; inputs and outputs share the field names.
void launch(const MtpCase& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream) {
  MtpExpandArgs args{};
  args.requests = c.bs;
  args.topk = c.topk;
  args.output_rows = c.bs * c.topk;
  for (const MetadataField& field : fields_of(c.field_set)) {
    if (args.num_fields == kMtpMaxFields) throw std::invalid_argument("mtp_expand: more than 16 fields");
    args.per_request[args.num_fields] = inputs.data<const int32_t>(field.name);
    args.expanded[args.num_fields] = outputs.data<int32_t>(field.name);
    const Shape& shape = inputs.at(field.name).shape;
    args.cols[args.num_fields] = shape.size() == 2 ? shape[1] : 1;
    ++args.num_fields;
  }
  launch_mtp_expand(args, static_cast<hipStream_t>(stream));
}
#endif

}  // namespace

Component mtp_expand_component() {
  Descriptor<Params> d;
  d.name = "mtp_expand";
  d.summary = "MTP draft rows: per-request metadata repeat_interleave'd to bs*topk request-major rows (spec 7)";
  d.verify_cases = {
      "mtp_expand(bs=1,topk=1)",          "mtp_expand(bs=1,topk=4)",
      "mtp_expand(bs=7,topk=3)",          "mtp_expand(bs=64,topk=2,fields=1)",
      "mtp_expand(bs=256,topk=4,fields=1)", "mtp_expand(bs=33,topk=4,ctx=524289,index_topk=1024)",
  };
  d.batch_param = "bs";
  d.replay_case = "mtp_expand(bs=1,topk=3,ctx=2048)";
  d.mutants = {
      DSV4H_MUTANT(mtp_zero_pad, "mtp_expand.hip", "rows copied once and the rest zero-padded, as _pad_tensor_to_size does (review finding 3)"),
  };
  d.gpu_tests = "*MtpExpand*";
  d.bench_binary = "bench_attn_metadata";
  d.bench_filter = "empty_kernel_graph|dependent_loads_graph|BM_mtp_expand|BM_copy_same_bytes_mtp|BM_copy_kernel_same_bytes_mtp";
  // Issue 5's goals (ci/goals.py); the peers (tests/peers/mtp_expand.py): torch's repeat_interleave
  // with output_size, eager and in a graph, torch.compile and a Triton kernel, each in a graph.
  d.goals = R"json([
    {"text": "mtp_expand bs={bs} topk={topk} fields={fields}: <= 1.5x an empty-kernel graph", "measure": "ratio_to_empty",
     "bound": 1.5, "empty": "BM_empty_kernel_graph/manual_time",
     "benchmark": "BM_mtp_expand/bs:{bs}/topk:{topk}/fields:{fields}/manual_time",
     "each": [[{"bs": 1}, {"bs": 64}, {"bs": 256}], [{"topk": 1}, {"topk": 4}], [{"fields": 1}, {"fields": 0}]],
     "floors": ["BM_dependent_loads_graph/depth:1/manual_time", "BM_copy_same_bytes_mtp/bs:{bs}/topk:{topk}/fields:{fields}/manual_time"]},
    {"text": "mtp_expand bs={bs} topk={topk} fields={fields}: faster than every peer (best: {best_peer}, {best_peer_us:.1f} us)",
     "measure": "faster_than_peers", "bound": 1.0, "peers": "peers.mtp_expand",
     "benchmark": "BM_mtp_expand/bs:{bs}/topk:{topk}/fields:{fields}/manual_time"}
  ])json";
  d.make_inputs = make_inputs;
  d.validate_inputs = validate_inputs;
  d.make_outputs = make_outputs;
  d.reference = run_reference;
  d.pad_batch = pad_batch;
  d.work = work;
  d.slice_batch = slice_batch;
  d.relation_cases = {
      "batch_invariance(chunks=3):mtp_expand(bs=33,topk=3)",
      "batch_invariance(chunks=4):mtp_expand(bs=64,topk=2,fields=1)",
  };
#if DSV4H_GPU_LAYER
  d.gpu = launch;
#endif
  return erase(std::move(d));
}

}  // namespace dsv4h
