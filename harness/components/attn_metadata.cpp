// Descriptor of `attn_metadata` (spec 6, review findings 1 and 2): one forward step's attention
// metadata built into a staging set ("temp_*", the real rows only), copied into the graph buffer
// set (the fields without prefix: fixed addresses, the bucket's rows, the capture widths) with
// the tail reset to padding, and read by a consumer (`swa_gathered`, a gather through
// swa_page_indices) as a layer would. The real request count is device data (`num_reqs`): inside
// a captured graph nothing may read it on the host. With temp=0 the update is a replay's: it builds
// straight into the buffers, and the staging set, not materialized, must stay unwritten.
#include <algorithm>
#include <cstring>
#include <string>

#include "../../reference/attn_metadata.h"
#include "../descriptor.h"
#include "../errors.h"
#include "../random.h"
#include "index_tensors.h"
#if DSV4H_GPU_LAYER
#include "../../kernels/attn_metadata.h"
#include "../gpu/device_tensor.h"
#include "../gpu/launchers.h"
#endif

namespace dsv4h {
namespace {

using reference::AttnMetadata;
using reference::kMetadataFields;
using reference::MetadataField;
using reference::MetadataWidths;

enum class Mode : int64_t { decode = 0, prefill = 1, verify = 2, draft = 3 };

struct Params {
  int64_t bs = 8, real = -1;
  Mode mode = Mode::decode;
  int64_t extend = 4, topk = 1, ctx = 1024, max_seq_len = -1, index_topk = 512, pool = 256, swa_slots = 65536;
  int64_t write_temp = 1, swa_distinct = 0;
  template <typename F>
  void fields(F& f) {
    f("bs", bs, "requests the buffer set holds (the captured bucket)");
    f("real", real, "real requests n <= bs (num_reqs, device data); -1 = bs");
    f("mode", mode, "0 decode, 1 prefill (expanded causally), 2 target verify, 3 draft decode");
    f("extend", extend, "target verify: draft tokens per request; prefill: most new tokens per request");
    f("topk", topk, "draft decode: rows per request (request-major)");
    f("ctx", ctx, "req_to_token columns = MAX_SEQ_LEN_FOR_CAPTURE (the buffers' widths)");
    f("max_seq_len", max_seq_len, "longest sequence of the step (the staging widths); -1 = ctx");
    f("index_topk", index_topk, "c4_sparse_page_indices columns");
    f("pool", pool, "request slots of req_to_token");
    f("swa_slots", swa_slots, "SWA slots (full_to_swa's range; the consumer's swa_kv)");
    f("temp", write_temp, "1: the staging set is written (an eager step); 0: a replay's update, into the buffers alone");
    f("swa_distinct", swa_distinct, "1: full_to_swa maps page 0 (the sink) to 0 and the rows' out slots to distinct SWA "
                                    "slots, as an allocator does, so that a memory pool can store the rows (c4_decode_step); "
                                    "0: every entry uniform");
  }
};
using MetaCase = CaseOf<Params>;

// The parameters with their defaults resolved (real, max_seq_len) and the sizes they imply.
struct Sizes : Params {
  int64_t rows_per_req = 0, rows = 0, full_slots = 0;
  MetadataWidths capture, temp;
  int64_t temp_cols = 0, buffer_cols = 0;  // a row's values over every field, in each set
};

Sizes sizes_of(const MetaCase& c) {
  Sizes s;
  static_cast<Params&>(s) = c;
  const auto bad = [&](const std::string& why) { return BadInput("attn_metadata: " + why + " in " + c.str()); };
  // Each size is bounded before any product of sizes is formed, so that none overflows.
  if (s.bs < 0 || s.bs > (1 << 20)) throw bad("bs must be in [0, 2^20]");
  if (s.real == -1) s.real = s.bs;
  if (s.real < 0 || s.real > s.bs)
    throw bad("real = " + std::to_string(s.real) + " requests do not fit the bucket's bs = " + std::to_string(s.bs));
  if (s.mode < Mode::decode || s.mode > Mode::draft) throw bad("mode must be 0 (decode), 1 (prefill), 2 (target verify) or 3 (draft decode)");
  if (s.extend < 1) throw bad("extend must be >= 1");
  if (s.write_temp != 0 && s.write_temp != 1) throw bad("temp must be 0 (a replay: no staging set written) or 1");
  if (s.topk < 1 || s.topk > (1 << 20)) throw bad("topk must be in [1, 2^20], got " + std::to_string(s.topk));
  if (s.ctx < 1 || s.ctx > (1 << 24)) throw bad("ctx must be in [1, 2^24]");
  if (s.max_seq_len == -1) s.max_seq_len = s.ctx;
  if (s.max_seq_len < 1 || s.max_seq_len > s.ctx)
    throw bad("max_seq_len (the staging widths) = " + std::to_string(s.max_seq_len) +
              " must be in [1, ctx (the buffer widths) = " + std::to_string(s.ctx) + "]");
  if (s.index_topk < 64 || s.index_topk % 64 || s.index_topk > (1 << 24))
    throw bad("index_topk must be a multiple of 64 in [64, 2^24]");
  if ((s.mode == Mode::verify || s.mode == Mode::prefill) && s.extend > s.max_seq_len)
    throw bad("extend must not exceed max_seq_len");
  if (s.pool < 1 || s.pool < s.real || s.pool > (1 << 28)) throw bad("pool must be in [1, 2^28] and hold the real requests");
  if (s.swa_slots < 1 || s.swa_slots > (1 << 26)) throw bad("swa_slots must be in [1, 2^26]");
  if (s.swa_distinct != 0 && s.swa_distinct != 1) throw bad("swa_distinct must be 0 or 1");
  const int64_t pages = (s.ctx + reference::kPageSize - 1) / reference::kPageSize;
  // req_to_token and full_to_swa hold a value a slot, 256 MB each at 2^26 (the benchmarks use 2^25).
  if (s.pool * pages * reference::kPageSize > (int64_t{1} << 26)) throw bad("pool * ctx above 2^26 slots");
  s.rows_per_req = s.mode == Mode::decode ? 1 : s.mode == Mode::draft ? s.topk : s.extend;
  s.rows = s.bs * s.rows_per_req;
  if (s.rows > (1 << 20)) throw bad("bs * rows per request above 2^20");
  if (s.swa_distinct && s.swa_slots <= s.rows)
    throw bad("swa_distinct needs a distinct SWA slot >= 1 for each of the " + std::to_string(s.rows) + " rows: raise swa_slots");
  s.full_slots = (s.pool * pages + 1) * reference::kPageSize;
  s.capture = MetadataWidths::for_seq_len(s.ctx, s.index_topk);
  s.temp = MetadataWidths::for_seq_len(s.max_seq_len, s.index_topk);
  for (const MetadataField& f : kMetadataFields) {
    s.temp_cols += reference::field_columns(f, s.temp);
    s.buffer_cols += reference::field_columns(f, s.capture);
  }
  if (s.rows * (s.temp_cols + s.buffer_cols) > (int64_t{1} << 28))
    throw bad("the rows' metadata (bs * rows per request * " + std::to_string(s.temp_cols + s.buffer_cols) +
              " columns) above 2^28 values");
  return s;
}

// Half the draws at a boundary of the C4/C128 blocks, the SWA window or a page, the rest uniform.
int64_t pick_seq_len(Rng& rng, int64_t lo, int64_t hi) {
  if (rng.uniform() < 0.5) {
    std::vector<int64_t> edges = {lo, hi, 1, 3, 4, 5, 127, 128, 129, 255, 256, 257};
    if (hi >= 511) {
      const int64_t k = rng.integer(1, (hi + 1) / 512);
      edges.insert(edges.end(), {512 * k - 1, 512 * k, 512 * k + 1});
    }
    edges.erase(std::remove_if(edges.begin(), edges.end(), [&](int64_t v) { return v < lo || v > hi; }), edges.end());
    return edges[static_cast<size_t>(rng.integer(0, static_cast<int64_t>(edges.size()) - 1))];
  }
  return rng.integer(lo, hi);
}

int32_t extend_of(const Sizes& s, Rng& rng) {
  if (s.mode == Mode::verify) return static_cast<int32_t>(s.extend);
  if (s.mode == Mode::prefill) return static_cast<int32_t>(rng.integer(1, s.extend));
  return 1;
}

TensorMap make_inputs(const MetaCase& c) {
  const Sizes s = sizes_of(c);
  Rng rng(c.seed());
  const int64_t pages = (s.ctx + reference::kPageSize - 1) / reference::kPageSize;
  // Each request slot owns whole pages drawn at random; page 0 stays the write sink.
  std::vector<int32_t> page_ids(static_cast<size_t>(s.pool * pages));
  for (size_t i = 0; i < page_ids.size(); ++i) page_ids[i] = static_cast<int32_t>(i + 1);
  for (size_t i = page_ids.size(); i > 1; --i) std::swap(page_ids[i - 1], page_ids[static_cast<size_t>(rng.integer(0, i - 1))]);
  HostTensor req_to_token(DType::i32, {s.pool, s.ctx});
  int32_t* r2t = req_to_token.data<int32_t>();
  for (int64_t slot = 0; slot < s.pool; ++slot)
    for (int64_t pos = 0; pos < s.ctx; ++pos)
      r2t[slot * s.ctx + pos] = static_cast<int32_t>(page_ids[slot * pages + pos / 256] * 256 + pos % 256);
  HostTensor full_to_swa(DType::i32, {s.full_slots});
  fill_integers(full_to_swa, rng, 0, s.swa_slots - 1);
  HostTensor swa_kv(DType::i32, {s.swa_slots});
  fill_integers(swa_kv, rng, -(1 << 30), 1 << 30);

  // Distinct request slots; requests beyond the real ones look like an engine's padded batch.
  std::vector<int32_t> slots(static_cast<size_t>(s.pool));
  for (size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<int32_t>(i);
  for (size_t i = slots.size(); i > 1; --i) std::swap(slots[i - 1], slots[static_cast<size_t>(rng.integer(0, i - 1))]);
  HostTensor req_pool_indices(DType::i32, {s.bs}), seq_lens(DType::i32, {s.bs}), extend_lens(DType::i32, {s.bs});
  HostTensor out_cache_loc(DType::i32, {s.rows}), num_reqs(DType::i32, {1});
  std::memset(out_cache_loc.bytes(), 0, out_cache_loc.nbytes());
  int64_t row = 0;
  for (int64_t r = 0; r < s.bs; ++r) {
    const bool real = r < s.real;
    const int32_t req = real ? slots[static_cast<size_t>(r)] : static_cast<int32_t>(rng.integer(0, s.pool - 1));
    const int32_t extend = real ? extend_of(s, rng) : 1;
    const int64_t seq_len = real ? pick_seq_len(rng, extend, s.max_seq_len) : 1;
    req_pool_indices.data<int32_t>()[r] = req;
    extend_lens.data<int32_t>()[r] = extend;
    seq_lens.data<int32_t>()[r] = static_cast<int32_t>(seq_len);
    if (!real) continue;
    for (int64_t i = 0; i < extend; ++i)
      for (int64_t copy = 0; copy < (s.mode == Mode::draft ? s.topk : 1); ++copy, ++row)
        out_cache_loc.data<int32_t>()[row] =
            copy == 0 ? r2t[req * s.ctx + seq_len - extend + i] : static_cast<int32_t>(rng.integer(1, s.full_slots - 1));
  }
  num_reqs.data<int32_t>()[0] = static_cast<int32_t>(s.real);
  if (s.swa_distinct) {
    // The first rows() of a shuffle of the SWA slots 1.. (partial Fisher-Yates), one a row's slot.
    int32_t* map = full_to_swa.data<int32_t>();
    std::fill(map, map + reference::kPageSize, 0);
    std::vector<int32_t> swa(static_cast<size_t>(s.swa_slots - 1));
    for (size_t i = 0; i < swa.size(); ++i) swa[i] = static_cast<int32_t>(i + 1);
    for (int64_t i = 0; i < s.rows; ++i) {
      std::swap(swa[static_cast<size_t>(i)], swa[static_cast<size_t>(rng.integer(i, s.swa_slots - 2))]);
      const int32_t loc = out_cache_loc.data<int32_t>()[i];
      if (loc > 0) map[loc] = swa[static_cast<size_t>(i)];
    }
  }
  return {{"req_to_token", std::move(req_to_token)}, {"full_to_swa", std::move(full_to_swa)},
          {"swa_kv", std::move(swa_kv)}, {"req_pool_indices", std::move(req_pool_indices)},
          {"seq_lens", std::move(seq_lens)}, {"extend_lens", std::move(extend_lens)},
          {"out_cache_loc", std::move(out_cache_loc)}, {"num_reqs", std::move(num_reqs)}};
}

void validate_inputs(const MetaCase& c, const TensorMap& inputs) {
  const Sizes s = sizes_of(c);
  const std::string name = "attn_metadata";
  require_i32(name, inputs, "req_to_token", {s.pool, s.ctx});
  require_i32(name, inputs, "full_to_swa", {s.full_slots});
  require_i32(name, inputs, "swa_kv", {s.swa_slots});
  for (const char* per_request : {"req_pool_indices", "seq_lens", "extend_lens"}) require_i32(name, inputs, per_request, {s.bs});
  require_i32(name, inputs, "out_cache_loc", {s.rows});
  require_i32(name, inputs, "num_reqs", {1});
  reject_unknown_inputs(name, inputs, {"req_to_token", "full_to_swa", "swa_kv", "req_pool_indices", "seq_lens",
                                       "extend_lens", "out_cache_loc", "num_reqs"});
  const auto values = [&](const char* n) { return inputs.at(n).data<int32_t>(); };
  const auto bad = [](const std::string& what, int64_t i, int64_t v, const std::string& why) {
    return BadInput("attn_metadata: " + what + "[" + std::to_string(i) + "] = " + std::to_string(v) + ": " + why);
  };
  for (int64_t i = 0; i < s.pool * s.ctx; ++i)
    if (values("req_to_token")[i] < 0 || values("req_to_token")[i] >= s.full_slots)
      throw bad("req_to_token", i, values("req_to_token")[i], "outside the " + std::to_string(s.full_slots) + " full slots");
  for (int64_t i = 0; i < s.full_slots; ++i)
    if (values("full_to_swa")[i] < 0 || values("full_to_swa")[i] >= s.swa_slots)
      throw bad("full_to_swa", i, values("full_to_swa")[i], "outside the SWA slots");
  const int32_t n = values("num_reqs")[0];
  if (n < 0 || n > s.bs) throw bad("num_reqs", 0, n, "more real requests than the bucket's bs = " + std::to_string(s.bs));
  for (int64_t r = 0; r < n; ++r) {
    const int32_t req = values("req_pool_indices")[r], extend = values("extend_lens")[r], len = values("seq_lens")[r];
    if (req < 0 || req >= s.pool) throw bad("req_pool_indices", r, req, "outside the pool");
    const bool extend_ok = s.mode == Mode::prefill ? extend >= 1 && extend <= s.extend
                                              : extend == (s.mode == Mode::verify ? s.extend : 1);
    if (!extend_ok) throw bad("extend_lens", r, extend, "does not fit the mode");
    if (len < extend || len > s.max_seq_len)
      throw bad("seq_lens", r, len, "needs extend_lens <= seq_lens <= max_seq_len = " + std::to_string(s.max_seq_len));
  }
  // Only carried into raw_out_loc and divided into the c4/c128 locations, never an index here: no
  // upper bound (the spec's worked example, fixtures/attn_metadata/golden-docstring-c4.json, has
  // locations beyond its small pool).
  for (int64_t i = 0; i < s.rows; ++i)
    if (values("out_cache_loc")[i] < 0) throw bad("out_cache_loc", i, values("out_cache_loc")[i], "a slot is >= 0");
}

TensorMap make_outputs(const MetaCase& c) {
  const Sizes s = sizes_of(c);
  TensorMap out;
  for (const MetadataField& f : kMetadataFields) {
    out.emplace(f.name, HostTensor(DType::i32, {s.rows, reference::field_columns(f, s.capture)}));
    out.emplace(std::string("temp_") + f.name, HostTensor(DType::i32, {s.rows, reference::field_columns(f, s.temp)}));
  }
  out.emplace("temp_num_rows", HostTensor(DType::i32, {1}));
  out.emplace("swa_gathered", HostTensor(DType::i32, {s.rows, reference::kSwaWindow}));
  return out;
}

void run_reference(const MetaCase& c, const TensorMap& inputs, TensorMap& outputs) {
  const Sizes s = sizes_of(c);
  reference::StepInputs in;
  in.req_to_token = to_index_matrix(inputs.at("req_to_token"));
  in.full_to_swa = to_index_matrix(inputs.at("full_to_swa"));
  in.req_pool_indices = to_index_matrix(inputs.at("req_pool_indices"));
  in.seq_lens = to_index_matrix(inputs.at("seq_lens"));
  in.extend_lens = to_index_matrix(inputs.at("extend_lens"));
  in.out_cache_loc = to_index_matrix(inputs.at("out_cache_loc"));
  in.num_reqs = inputs.at("num_reqs").data<int32_t>()[0];
  in.row_repeat = s.mode == Mode::draft ? s.topk : 1;
  const AttnMetadata temp = reference::build_attn_metadata(in, s.temp);
  AttnMetadata buffers = reference::padding_metadata(s.rows, s.capture);
  reference::copy_into(buffers, temp);
  for (const MetadataField& f : kMetadataFields) {
    if (s.write_temp) write_rows(outputs.at(std::string("temp_") + f.name), temp.*f.member);
    write_rows(outputs.at(f.name), buffers.*f.member);
  }
  outputs.at("temp_num_rows").data<int32_t>()[0] = static_cast<int32_t>(temp.rows());
  // The consumer: the SWA values a row attends to, 0 where the column is beyond its length or -1.
  const int32_t* swa_kv = inputs.at("swa_kv").data<int32_t>();
  reference::IndexMatrix gathered(s.rows, reference::kSwaWindow);
  for (int64_t row = 0; row < s.rows; ++row)
    for (int64_t k = 0; k < reference::kSwaWindow; ++k) {
      const int32_t slot = buffers.swa_page_indices(row, k);
      gathered(row, k) = k < buffers.swa_topk_lengths(row, 0) && slot >= 0 && slot < s.swa_slots ? swa_kv[slot] : 0;
    }
  write_rows(outputs.at("swa_gathered"), gathered);
}

// The engine's padded static inputs (spec 6.3): seq_lens 1 and extend 1 beyond the real requests,
// req_pool_indices stale there, out_cache_loc zeroed; num_reqs keeps the real count.
TensorMap pad_batch(const MetaCase& c, const TensorMap& inputs, int64_t bucket) {
  const Sizes s = sizes_of(c);
  if (bucket < s.bs) throw BadInput("attn_metadata: bucket " + std::to_string(bucket) + " < bs " + std::to_string(s.bs));
  Rng rng(c.seed() ^ 0x5eed0fba7c4ULL);
  TensorMap padded = {{"req_to_token", inputs.at("req_to_token")}, {"full_to_swa", inputs.at("full_to_swa")},
                      {"swa_kv", inputs.at("swa_kv")}, {"num_reqs", inputs.at("num_reqs")}};
  const auto grow = [&](const char* name, int64_t length, const std::function<int32_t()>& fill) {
    const HostTensor& real = inputs.at(name);
    HostTensor t(DType::i32, {length});
    std::memcpy(t.bytes(), real.bytes(), real.nbytes());
    for (int64_t i = real.numel(); i < length; ++i) t.data<int32_t>()[i] = fill();
    padded.emplace(name, std::move(t));
  };
  grow("req_pool_indices", bucket, [&] { return static_cast<int32_t>(rng.integer(0, s.pool - 1)); });
  grow("seq_lens", bucket, [] { return 1; });
  grow("extend_lens", bucket, [] { return 1; });
  grow("out_cache_loc", bucket * s.rows_per_req, [] { return 0; });
  return padded;
}

// Requests are independent where each owns a fixed number of rows (decode, target verify, draft
// decode): requests [begin, end) are rows [begin, end) * rows per request of every output but the
// staging row count, and the real requests (a prefix) that fall among them are the slice's. A
// prefill packs its requests' varying rows, so a sub-batch's padding rows sit elsewhere.
BatchSlice slice_batch(const MetaCase& c, const TensorMap& inputs, int64_t begin, int64_t end) {
  const Sizes s = sizes_of(c);
  if (s.mode == Mode::prefill) throw BadInput("attn_metadata: batch relations need a fixed number of rows per request, not prefill");
  const int32_t real = inputs.at("num_reqs").data<int32_t>()[0];
  HostTensor num_reqs(DType::i32, {1});
  num_reqs.data<int32_t>()[0] = static_cast<int32_t>(std::clamp<int64_t>(real - begin, 0, end - begin));
  BatchSlice slice{c.untyped().with("bs", std::to_string(end - begin)).with("real", "-1"),
                   {{"req_to_token", inputs.at("req_to_token")}, {"full_to_swa", inputs.at("full_to_swa")},
                    {"swa_kv", inputs.at("swa_kv")}, {"num_reqs", std::move(num_reqs)},
                    {"out_cache_loc", inputs.at("out_cache_loc").rows(begin * s.rows_per_req, end * s.rows_per_req)}},
                   {}};
  for (const char* name : {"req_pool_indices", "seq_lens", "extend_lens"}) slice.inputs.emplace(name, inputs.at(name).rows(begin, end));
  for (const auto& [name, t] : make_outputs(c))
    if (name != "temp_num_rows") slice.output_rows.emplace(name, begin * s.rows_per_req);
  return slice;
}

WorkCount work(const MetaCase& c, const TensorMap& inputs) {
  const Sizes s = sizes_of(c);
  reference::StepInputs in;
  in.extend_lens = to_index_matrix(inputs.at("extend_lens"));
  in.num_reqs = inputs.at("num_reqs").data<int32_t>()[0];
  in.row_repeat = s.mode == Mode::draft ? s.topk : 1;
  const int64_t real_rows = reference::query_rows(in);
  // Per real row: 128 req_to_token and 128 full_to_swa reads and one per page, and the staging row
  // written (temp=1); per bucket row: the buffer row written, and the consumer's 128 index reads,
  // 128 gathers and 128 writes. All int32.
  const double ints = static_cast<double>(real_rows * (256 + s.temp.page_cols + s.write_temp * s.temp_cols) +
                                          s.rows * (s.buffer_cols + 3 * reference::kSwaWindow));
  return {4 * ints, 0};
}

#if DSV4H_GPU_LAYER
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

void launch_update(const MetaCase& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream) {
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
  // Prefill's tokens per request vary (0: read extend_lens); the others' are fixed.
  update.tokens_per_request = c.mode == Mode::prefill ? 0 : c.mode == Mode::verify ? c.extend : 1;
  update.row_repeat = c.mode == Mode::draft ? c.topk : 1;
  update.staging = buffers_of(outputs, "temp_", c.write_temp == 1);
  update.num_rows = outputs.data<int32_t>("temp_num_rows");
  update.buffers = buffers_of(outputs, "");
  launch_attn_metadata_update(update, static_cast<hipStream_t>(stream));
}

void launch(const MetaCase& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream) {
  launch_update(c, inputs, outputs, stream);
  SwaGatherArgs gather{};
  gather.swa_page_indices = outputs.data<const int32_t>("swa_page_indices");
  gather.swa_topk_lengths = outputs.data<const int32_t>("swa_topk_lengths");
  gather.swa_kv = inputs.data<const int32_t>("swa_kv");
  gather.swa_slots = inputs.at("swa_kv").shape[0];
  gather.gathered = outputs.data<int32_t>("swa_gathered");
  gather.rows = outputs.at("swa_gathered").shape[0];
  launch_swa_gather(gather, static_cast<hipStream_t>(stream));
}
#endif

}  // namespace

#if DSV4H_GPU_LAYER
void launch_attn_metadata_update(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream) {
  launch_update(MetaCase(c), inputs, outputs, stream);
}
#endif

Component attn_metadata_component() {
  Descriptor<Params> d;
  d.name = "attn_metadata";
  d.summary = "attention metadata of a step (spec 6.2), copied into the graph buffers with the tail reset to padding (6.4)";
  d.verify_cases = {
      "attn_metadata(bs=1,mode=0)",
      "attn_metadata(bs=8,real=1,mode=0)",
      "attn_metadata(bs=8,real=3,mode=0,ctx=2048,max_seq_len=700)",
      "attn_metadata(bs=8,real=1,mode=2,extend=4)",
      "attn_metadata(bs=16,real=11,mode=1,extend=8)",
      "attn_metadata(bs=8,real=5,mode=3,topk=3)",
      "attn_metadata(bs=64,mode=2,extend=2,ctx=4096,max_seq_len=2000)",
      "attn_metadata(bs=4,real=0,mode=0)",
      "attn_metadata(bs=2,mode=0,ctx=524289,pool=2,index_topk=1024)",
      "attn_metadata(bs=8,real=3,mode=2,extend=3,ctx=2048,max_seq_len=700,temp=0)",
      "attn_metadata(bs=16,real=11,mode=1,extend=8,temp=0)",
  };
  d.batch_param = "bs";
  d.replay_case = "attn_metadata(bs=1,mode=0,ctx=2048,max_seq_len=1300)";
  d.mutants = {
      DSV4H_MUTANT(meta_padding_item, "attn_metadata.hip", "the real row count read back to the host before the copy (review finding 1)"),
      DSV4H_MUTANT(meta_full_shape_copy, "attn_metadata.hip", "every staging row copied, stale ones too, and no tail padded (finding 2)"),
      DSV4H_MUTANT(meta_row0_broadcast, "attn_metadata.hip", "one real row broadcast to every buffer row (torch's copy_ of a 1-row src)"),
      DSV4H_MUTANT(meta_tail_not_reset, "attn_metadata.hip", "the tail rows left as an earlier replay left them"),
      DSV4H_RACE_MUTANT(meta_missing_barrier, "attn_metadata.hip", "no barrier before a prefill scan chunk rewrites the shared scratch: a race"),
      DSV4H_MUTANT(meta_extra_columns_stale, "attn_metadata.hip", "a narrower field copied as dst[:n, :w], the columns beyond w stale (spec 6.4)"),
  };
  d.gpu_tests = "*AttnMetadata*:*MetadataGpu*";
  d.bench_binary = "bench_attn_metadata";
  d.bench_filter = "empty_kernel_graph|dependent_loads_graph|BM_attn_metadata_update|BM_copy_same_bytes_update|"
                   "BM_copy_kernel_same_bytes_update";
  // Issue 5's goals, judged on a replay's update (temp:0, built straight into the buffers); the same
  // update also writing the staging set, as an eager step does (temp:1), is named beside it. The
  // 10x is against per-field copies as an engine runs them, eagerly before a replay; captured in a
  // graph too, torch's copies cost less than 10x a one-node graph (ci/goals.py). The peers:
  // tests/peers/attn_metadata.py (torch eager, in a graph, torch.compile and a Triton kernel).
  d.goals = R"json([
    {"text": "attn_metadata update bs={bs} verify={verify} ctx={ctx}, a replay's (with the staging set written too: {staging_us:.3f} us): <= 3 us per graph replay",
     "measure": "max_us", "bound": 3.0,
     "benchmark": "BM_attn_metadata_update/bs:{bs}/verify:{verify}/ctx:{ctx}/temp:0/manual_time",
     "each": [[{"bs": 1}, {"bs": 8}, {"bs": 64}, {"bs": 256}], [{"verify": 0}, {"verify": 1}], [{"ctx": 8192}, {"ctx": 131072}]],
     "also": {"staging_us": "BM_attn_metadata_update/bs:{bs}/verify:{verify}/ctx:{ctx}/temp:1/manual_time"},
     "floors": ["BM_dependent_loads_graph/depth:3/manual_time", "BM_copy_same_bytes_update/bs:{bs}/verify:{verify}/ctx:{ctx}/temp:0/manual_time"]},
    {"text": "attn_metadata update bs={bs} verify={verify} ctx={ctx}, a replay's (with the staging set written too: {staging_us:.3f} us): >= 10x faster than torch per-field copies, eager ({eager_us:.1f} us; in a graph {graph_us:.1f} us, {graph_speedup:.2f}x)",
     "measure": "speedup_over_peer", "bound": 10, "peers": "peers.attn_metadata", "against": "eager_us",
     "benchmark": "BM_attn_metadata_update/bs:{bs}/verify:{verify}/ctx:{ctx}/temp:0/manual_time",
     "also": {"staging_us": "BM_attn_metadata_update/bs:{bs}/verify:{verify}/ctx:{ctx}/temp:1/manual_time"},
     "ratios": {"graph_speedup": "graph_us / us"}},
    {"text": "attn_metadata update bs={bs} verify={verify} ctx={ctx}, a replay's: faster than every peer (best: {best_peer}, {best_peer_us:.1f} us)",
     "measure": "faster_than_peers", "bound": 1.0, "peers": "peers.attn_metadata",
     "benchmark": "BM_attn_metadata_update/bs:{bs}/verify:{verify}/ctx:{ctx}/temp:0/manual_time"}
  ])json";
  d.make_inputs = make_inputs;
  d.validate_inputs = validate_inputs;
  d.make_outputs = make_outputs;
  d.reference = run_reference;
  d.pad_batch = pad_batch;
  d.work = work;
  d.slice_batch = slice_batch;
  d.relation_cases = {
      "batch_invariance(chunks=3):attn_metadata(bs=16,real=11,mode=0,ctx=2048,max_seq_len=1300)",
      "batch_invariance(chunks=4):attn_metadata(bs=12,real=12,mode=2,extend=3,temp=0)",
      "batch_invariance(chunks=3):attn_metadata(bs=9,real=6,mode=3,topk=2)",
  };
#if DSV4H_GPU_LAYER
  d.gpu = launch;
#endif
  return erase(std::move(d));
}

}  // namespace dsv4h
