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
#include "../errors.h"
#include "../random.h"
#include "all_components.h"
#include "index_tensors.h"
#include "mtp_expand.h"

namespace dsv4h {
namespace {

using reference::kMetadataFields;
using reference::MetadataField;

struct Sizes {
  int64_t bs, topk, ctx, index_topk, field_set;
  reference::MetadataWidths widths;
  int64_t row_cols;  // a row's values over the expanded fields
};

// The expanded fields: every per-request field (field_set 0) or those the draft layer reads (1).
std::vector<MetadataField> fields_of(int64_t field_set) {
  if (field_set == 0) return {kMetadataFields.begin(), kMetadataFields.end()};
  std::vector<MetadataField> draft;
  for (const MetadataField& f : kMetadataFields)
    for (const char* name : {"raw_out_loc", "seq_lens_casual", "positions_casual", "swa_page_indices", "swa_topk_lengths"})
      if (std::string(f.name) == name) draft.push_back(f);
  return draft;
}

Sizes sizes_of(const Case& c) {
  Sizes s{c.integer("bs"), c.integer("topk"), c.integer("ctx"), c.integer("index_topk"), c.integer("fields"), {}, 0};
  const auto bad = [&](const std::string& why) { return BadInput("mtp_expand: " + why + " in " + c.str()); };
  // Each size is bounded before any product of sizes is formed, so that none overflows.
  if (s.bs < 0 || s.bs > (1 << 20)) throw bad("bs must be in [0, 2^20]");
  if (s.topk < 1 || s.topk > (1 << 20)) throw bad("topk must be in [1, 2^20], got " + std::to_string(s.topk));
  if (s.ctx < 1 || s.ctx > (1 << 24)) throw bad("ctx must be in [1, 2^24]");
  if (s.index_topk < 64 || s.index_topk % 64 || s.index_topk > (1 << 24))
    throw bad("index_topk must be a multiple of 64 in [64, 2^24]");
  if (s.field_set != 0 && s.field_set != 1) throw bad("fields must be 0 (all) or 1 (the draft layer's)");
  if (s.bs * s.topk > (1 << 20)) throw bad("bs * topk above 2^20 rows");
  s.widths = reference::MetadataWidths::for_seq_len(s.ctx, s.index_topk);
  for (const MetadataField& f : fields_of(s.field_set)) s.row_cols += reference::field_columns(f, s.widths);
  if (s.bs * (1 + s.topk) * s.row_cols > (int64_t{1} << 28))
    throw bad("the rows' fields (bs * (1 + topk) * " + std::to_string(s.row_cols) + " columns) above 2^28 values");
  return s;
}

TensorMap make_inputs(const Case& c) {
  const Sizes s = sizes_of(c);
  Rng rng(c.seed());
  TensorMap inputs;
  for (const MetadataField& f : fields_of(s.field_set)) {
    HostTensor t(DType::i32, {s.bs, reference::field_columns(f, s.widths)});
    fill_integers(t, rng, -1, 1 << 20);
    inputs.emplace(f.name, std::move(t));
  }
  return inputs;
}

void validate_inputs(const Case& c, const TensorMap& inputs) {
  const Sizes s = sizes_of(c);
  const std::vector<MetadataField> fields = fields_of(s.field_set);
  std::vector<std::string> names;
  for (const MetadataField& f : fields) {
    require_i32("mtp_expand", inputs, f.name, {s.bs, reference::field_columns(f, s.widths)});
    names.push_back(f.name);
  }
  reject_unknown_inputs("mtp_expand", inputs, names);
}

TensorMap make_outputs(const Case& c) {
  const Sizes s = sizes_of(c);
  TensorMap out;
  for (const MetadataField& f : fields_of(s.field_set))
    out.emplace(f.name, HostTensor(DType::i32, {s.bs * s.topk, reference::field_columns(f, s.widths)}));
  return out;
}

void run_reference(const Case& c, const TensorMap& inputs, TensorMap& outputs) {
  const Sizes s = sizes_of(c);
  for (const MetadataField& f : fields_of(s.field_set))
    write_rows(outputs.at(f.name), reference::repeat_interleave(to_index_matrix(inputs.at(f.name)), s.topk, s.bs * s.topk));
}

// A padded request is a padding row of the metadata (spec 6.4), expanded like any other.
TensorMap pad_batch(const Case& c, const TensorMap& inputs, int64_t bucket) {
  const Sizes s = sizes_of(c);
  if (bucket < s.bs) throw BadInput("mtp_expand: bucket " + std::to_string(bucket) + " < bs " + std::to_string(s.bs));
  TensorMap padded;
  for (const MetadataField& f : fields_of(s.field_set)) {
    const HostTensor& real = inputs.at(f.name);
    HostTensor t(DType::i32, {bucket, real.shape()[1]});
    std::memcpy(t.bytes(), real.bytes(), real.nbytes());
    for (int64_t i = real.numel(); i < t.numel(); ++i) t.data<int32_t>()[i] = f.padding;
    padded.emplace(f.name, std::move(t));
  }
  return padded;
}

WorkCount work(const Case& c, const TensorMap&) {
  const Sizes s = sizes_of(c);
  return {4.0 * static_cast<double>(s.row_cols * s.bs * (1 + s.topk)), 0};  // each input row read once, written topk times
}

}  // namespace

std::vector<MetadataField> mtp_expand_fields(const Case& c) { return fields_of(sizes_of(c).field_set); }

Component mtp_expand_component() {
  Component c;
  c.name = "mtp_expand";
  c.summary = "MTP draft rows: per-request metadata repeat_interleave'd to bs*topk request-major rows (spec 7)";
  c.params = {
      {"bs", ParamKind::integer, "8", "requests"},
      {"topk", ParamKind::integer, "2", "draft rows per request"},
      {"ctx", ParamKind::integer, "1024", "longest sequence the widths hold (page_table, c128_page_indices)"},
      {"index_topk", ParamKind::integer, "512", "c4_sparse_page_indices columns"},
      {"fields", ParamKind::integer, "0", "0 every per-request field, 1 the draft layer's (SWA-only)"},
  };
  c.verify_cases = {
      "mtp_expand(bs=1,topk=1)",          "mtp_expand(bs=1,topk=4)",
      "mtp_expand(bs=7,topk=3)",          "mtp_expand(bs=64,topk=2,fields=1)",
      "mtp_expand(bs=256,topk=4,fields=1)", "mtp_expand(bs=33,topk=4,ctx=524289,index_topk=1024)",
  };
  c.batch_param = "bs";
  c.replay_case = "mtp_expand(bs=1,topk=3,ctx=2048)";
  c.make_inputs = make_inputs;
  c.validate_inputs = validate_inputs;
  c.make_outputs = make_outputs;
  c.reference = run_reference;
  c.pad_batch = pad_batch;
  c.work = work;
  return c;
}

}  // namespace dsv4h
