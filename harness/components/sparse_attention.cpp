// Descriptor of `sparse_attention` (issue 30; spec 3.4, 4.1, 9.2): DeepSeek-V4's attention over a
// query row's sliding window plus its compressed entries (C4: the indexer's selection, C128: every
// visible one, ratio 0: none), with the per-head sink, reading MODEL1 FP8 pools.
//
// Inputs are generated directly (the memory pool and metadata components make them in the model):
// every row is its own request at position p, its window entries p-127..p and its compressed
// entries at distinct random slots of the pools, the metadata's index lists and lengths built by
// spec 6.2's formulas. Beyond a row's compressed length the lists hold stale valid slots (the
// indexer's buffer is not cleared between layers), so a kernel that reads past the length reads
// real keys, not -1. A C4 row's selection has -1 holes with probability `holes` inside its length.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../../reference/kv_cache_model1.h"
#include "../../reference/narrow_float.h"
#include "../../reference/sparse_attention.h"
#include "../descriptor.h"
#include "../errors.h"
#include "../random.h"
#include "index_tensors.h"
#if DSV4H_GPU_LAYER
#include "../../kernels/sparse_attention.h"
#include "../gpu/device_tensor.h"
#endif

namespace dsv4h {
namespace {

using reference::kModel1TokenBytes;
constexpr int64_t kDims = reference::kAttentionDims;
constexpr int64_t kWindow = 128;
constexpr int64_t kSwaPageTokens = 256, kC4PageTokens = 64, kC128PageTokens = 2;  // spec 4.1

enum class Scores : int64_t { random = 0, dominant = 1, all_equal = 2, sink_negative = 3, sink_positive = 4 };

struct Params {
  int64_t bs = 4, heads = 64, ratio = 4, pos = -1, ctx = 4096, index_topk = 512;
  Scores scores = Scores::random;
  double holes = 0.05;
  int64_t padding = 0;
  int64_t prefill = 0;
  template <typename F>
  void fields(F& f) {
    f("bs", bs, "query rows (decode: one per request)");
    f("heads", heads, "query heads: 64 (Flash) or 128 (Pro); a multiple of 16");
    f("ratio", ratio, "compress ratio of the layer: 0 (window only), 4 (C4, indexer-selected) or 128 (C128, dense)");
    f("pos", pos, "every row's position p; -1 = random in [0, ctx)");
    f("ctx", ctx, "positions are below ctx; sizes the C128 index width");
    f("index_topk", index_topk, "C4 entries selected at most (512; 1024 for the larger config)");
    f("scores", scores, "0 random, 1 one dominant key, 2 all scores equal (q = 0), 3 sink -100, 4 sink +30");
    f("holes", holes, "probability of -1 among a C4 row's selected entries");
    f("prefill", prefill, "1: the rows are one request's consecutive tokens from pos (random when -1), causal through their lengths");
    f("padding", padding, "the last rows are padding rows (spec 6.2): lengths 1, every index -1, no valid key");
  }
};
using AttnCase = CaseOf<Params>;

struct Sizes {
  bool has_extra = false;
  int64_t extra_width = 0, extra_page_tokens = 0;
};

Sizes sizes_of(const AttnCase& c) {
  const auto bad = [&](const std::string& why) { return BadInput("sparse_attention: " + why + " in " + c.str()); };
  if (c.bs < 0 || c.bs > 16384) throw bad("bs must be in [0, 16384]");
  if (c.heads < 16 || c.heads > 128 || c.heads % 16) throw bad("heads must be a multiple of 16 in [16, 128]");
  // q and out are bs x heads x 512 (1 GiB each at the bound; the reference's out 4 GiB in double).
  if (c.bs * c.heads > (int64_t{1} << 20)) throw bad("bs * heads above 2^20 query rows");
  if (c.ratio != 0 && c.ratio != 4 && c.ratio != 128) throw bad("ratio must be 0, 4 or 128");
  if (c.ctx < 1 || c.ctx > (1 << 20)) throw bad("ctx must be in [1, 2^20]");
  if (c.pos < -1 || c.pos >= c.ctx) throw bad("pos must be -1 (random) or in [0, ctx)");
  if (c.index_topk < 64 || c.index_topk > 2048 || c.index_topk % 64) throw bad("index_topk must be a multiple of 64 in [64, 2048]");
  if (c.scores < Scores::random || c.scores > Scores::sink_positive) throw bad("scores must be in 0..4");
  if (!(c.holes >= 0 && c.holes <= 1)) throw bad("holes must be in [0, 1]");
  if (c.padding < 0 || c.padding > c.bs) throw bad("padding must be in [0, bs]");
  if (c.prefill != 0 && c.prefill != 1) throw bad("prefill must be 0 or 1");
  if (c.prefill && (c.bs > c.ctx || (c.pos >= 0 && c.pos + c.bs > c.ctx))) throw bad("prefill rows must stay below ctx");
  Sizes s;
  s.has_extra = c.ratio != 0;
  if (c.ratio == 4) s.extra_width = c.index_topk, s.extra_page_tokens = kC4PageTokens;
  if (c.ratio == 128) s.extra_width = (c.ctx / 128 + 64) / 64 * 64, s.extra_page_tokens = kC128PageTokens;
  return s;
}

// Pool capacities in keys: a bound on the distinct keys of the case's rows that depends on its
// parameters only, not on the random positions, so that pad_batch can grow a batch's pools to
// exactly the bucket's (graph replay uploads them into the buffers captured at the bucket). Decode
// rows are distinct requests (each at most its per-row count); prefill rows share request 0's keys.
struct Capacities {
  int64_t swa = 0, extra = 0;
};

Capacities capacities_of(const AttnCase& c) {
  Capacities cap;
  cap.swa = c.prefill ? std::min(c.ctx, c.bs + kWindow) : c.bs * std::min(c.ctx, kWindow);
  if (c.ratio == 4) cap.extra = c.bs * std::min(c.ctx / 4, c.index_topk);
  if (c.ratio == 4 && c.prefill) cap.extra = std::min(cap.extra, c.ctx / 4);
  if (c.ratio == 128) cap.extra = c.prefill ? c.ctx / 128 : c.bs * (c.ctx / 128);
  return cap;
}

// A pool's bytes: pages for `capacity` keys and at least one spare slot.
int64_t pool_bytes(int64_t capacity, int64_t page_tokens) {
  return (capacity + 1 + page_tokens - 1) / page_tokens * reference::model1_page_bytes(page_tokens);
}

// A pool with room for `capacity` keys (pool_bytes), each slot a random latent, and `entries`
// used slots in random order.
struct Pool {
  HostTensor bytes;
  std::vector<int32_t> slots;
  int64_t slot_count = 0;
};

Pool make_pool(int64_t entries, int64_t capacity, int64_t page_tokens, Rng& rng) {
  Pool pool;
  const int64_t page_bytes = reference::model1_page_bytes(page_tokens);
  const int64_t pages = pool_bytes(capacity, page_tokens) / page_bytes;
  pool.slot_count = pages * page_tokens;
  pool.bytes = HostTensor(DType::u8, {pages * page_bytes});
  // A slot's latent takes 2 draws a value (normal()), so the slots are made on every core, each
  // piece from the generator at its first slot: the bytes of making them in order, and a pool of
  // 164K slots (bs 256 at ctx 64K, the benchmark's) in a fraction of its 6 s on one core.
  constexpr int64_t kDrawsPerSlot = 2 * kDims;
  const auto make_slots = [&](int64_t first, int64_t end) {
    Rng piece = rng.ahead(static_cast<uint64_t>(first * kDrawsPerSlot));
    std::vector<uint16_t> latent(kDims);
    for (int64_t slot = first; slot < end; ++slot) {
      for (uint16_t& v : latent) v = reference::double_to_bf16(piece.normal());
      reference::model1_pack_token(latent.data(), page_tokens, slot % page_tokens,
                                   pool.bytes.bytes() + slot / page_tokens * page_bytes);
    }
  };
  const int64_t workers = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 16);
  const int64_t per_worker = (pool.slot_count + workers - 1) / workers;
  std::vector<std::thread> threads;
  for (int64_t first = per_worker; first < pool.slot_count; first += per_worker)
    threads.emplace_back(make_slots, first, std::min(first + per_worker, pool.slot_count));
  make_slots(0, std::min(per_worker, pool.slot_count));
  for (std::thread& t : threads) t.join();
  rng = rng.ahead(static_cast<uint64_t>(pool.slot_count * kDrawsPerSlot));
  pool.slots.resize(static_cast<size_t>(pool.slot_count));
  std::iota(pool.slots.begin(), pool.slots.end(), 0);
  for (int64_t i = pool.slot_count - 1; i > 0; --i) std::swap(pool.slots[i], pool.slots[rng.integer(0, i)]);
  pool.slots.resize(static_cast<size_t>(entries));
  return pool;
}

// `count` distinct values of [0, n) in random order (a partial Fisher-Yates over a sparse map of
// the positions it moved).
std::vector<int64_t> sample_distinct(int64_t n, int64_t count, Rng& rng) {
  std::vector<int64_t> picked;
  std::unordered_map<int64_t, int64_t> moved;
  const auto value_at = [&](int64_t i) {
    const auto it = moved.find(i);
    return it == moved.end() ? i : it->second;
  };
  for (int64_t k = 0; k < count; ++k) {
    const int64_t j = rng.integer(k, n - 1);
    const int64_t vj = value_at(j), vk = value_at(k);
    picked.push_back(vj);
    moved[j] = vk;
    moved[k] = vj;
  }
  return picked;
}

// Slots of a pool's keys: each distinct (request, position or entry id) gets the next id, which
// make_pool's shuffled slots turn into a slot.
struct KeyIds {
  std::map<std::pair<int64_t, int64_t>, int64_t> ids;
  int64_t of(int64_t request, int64_t key) { return ids.emplace(std::make_pair(request, key), ids.size()).first->second; }
};

TensorMap make_inputs(const AttnCase& c) {
  const Sizes s = sizes_of(c);
  Rng rng(c.seed());
  // Decode: row n is request n at its own position. Prefill: the rows are request 0's tokens
  // first, first + 1, ... (spec 6.1's causal expansion), sharing its keys.
  std::vector<int64_t> positions(static_cast<size_t>(c.bs)), requests(static_cast<size_t>(c.bs));
  const int64_t first = !c.prefill ? 0 : c.pos >= 0 ? c.pos : rng.integer(0, c.ctx - std::max<int64_t>(c.bs, 1));
  for (int64_t n = 0; n < c.bs; ++n) {
    requests[n] = c.prefill ? 0 : n;
    positions[n] = c.prefill ? first + n : (c.pos >= 0 ? c.pos : rng.integer(0, c.ctx - 1));
  }

  // Each row's compressed entries (C4: a random selection of the visible ones, as the indexer's
  // top-k; C128: all visible), and every key's id in its pool.
  std::vector<std::vector<int64_t>> extra_entries(static_cast<size_t>(c.bs));
  KeyIds swa_ids, extra_ids;
  for (int64_t n = 0; n < c.bs; ++n) {
    const int64_t length = positions[n] + 1;
    for (int64_t k = 0; k < std::min(length, kWindow); ++k) swa_ids.of(requests[n], positions[n] - k);
    if (c.ratio == 4) extra_entries[n] = sample_distinct(length / 4, std::min(length / 4, c.index_topk), rng);
    if (c.ratio == 128) {
      extra_entries[n].resize(static_cast<size_t>(length / 128));
      std::iota(extra_entries[n].begin(), extra_entries[n].end(), 0);
    }
    for (int64_t entry : extra_entries[n]) extra_ids.of(requests[n], entry);
  }
  const Capacities cap = capacities_of(c);
  Pool swa = make_pool(static_cast<int64_t>(swa_ids.ids.size()), cap.swa, kSwaPageTokens, rng);
  Pool extra = s.has_extra ? make_pool(static_cast<int64_t>(extra_ids.ids.size()), cap.extra, s.extra_page_tokens, rng) : Pool{};

  HostTensor swa_indices(DType::i32, {c.bs, kWindow}), swa_lengths(DType::i32, {c.bs}), pos_t(DType::i32, {c.bs});
  HostTensor extra_indices(DType::i32, {c.bs, s.extra_width}), extra_lengths(DType::i32, {c.bs});
  for (int64_t n = 0; n < c.bs; ++n) {
    const int64_t length = positions[n] + 1;
    pos_t.data<int32_t>()[n] = static_cast<int32_t>(positions[n]);
    // Column k holds position p - k (spec 6.2), -1 before the sequence's start.
    const int64_t window = std::min(length, kWindow);
    swa_lengths.data<int32_t>()[n] = static_cast<int32_t>(window);
    for (int64_t k = 0; k < kWindow; ++k)
      swa_indices.data<int32_t>()[n * kWindow + k] = k < window ? swa.slots[swa_ids.of(requests[n], positions[n] - k)] : -1;
    if (!s.has_extra) continue;
    int32_t* row = extra_indices.data<int32_t>() + n * s.extra_width;
    const int64_t count = static_cast<int64_t>(extra_entries[n].size());
    // FlashMLA needs a length >= 1: an empty list is length 1 holding -1 (spec 3.4's edge case).
    extra_lengths.data<int32_t>()[n] = static_cast<int32_t>(std::max<int64_t>(count, 1));
    for (int64_t j = 0; j < s.extra_width; ++j) row[j] = static_cast<int32_t>(rng.integer(0, extra.slot_count - 1));
    if (count == 0) row[0] = -1;
    for (int64_t j = 0; j < count; ++j) {
      const int32_t slot = extra.slots[extra_ids.of(requests[n], extra_entries[n][j])];
      row[j] = c.ratio == 4 && rng.uniform() < c.holes ? -1 : slot;
    }
  }

  for (int64_t n = c.bs - c.padding; n < c.bs; ++n) {
    pos_t.data<int32_t>()[n] = 0;
    swa_lengths.data<int32_t>()[n] = 1;
    for (int64_t k = 0; k < kWindow; ++k) swa_indices.data<int32_t>()[n * kWindow + k] = -1;
    if (!s.has_extra) continue;
    extra_lengths.data<int32_t>()[n] = 1;
    for (int64_t j = 0; j < s.extra_width; ++j) extra_indices.data<int32_t>()[n * s.extra_width + j] = -1;
  }

  HostTensor q(DType::bf16, {c.bs, c.heads, kDims});
  if (c.scores == Scores::all_equal) {
    for (int64_t i = 0; i < q.numel(); ++i) q.set(i, 0.0);
  } else {
    fill_normal(q, rng, 0.0, 1.0);
  }
  if (c.scores == Scores::dominant) {
    // q = 0.88 k + noise for the row's own token (window column 0): its score is about 20 above
    // the others (0.88 * 512 * 512^-0.5).
    std::vector<uint16_t> latent(kDims);
    const int64_t page_bytes = reference::model1_page_bytes(kSwaPageTokens);
    for (int64_t n = 0; n < c.bs - c.padding; ++n) {
      const int32_t slot = swa_indices.data<int32_t>()[n * kWindow];
      reference::model1_unpack_token(swa.bytes.bytes() + slot / kSwaPageTokens * page_bytes, kSwaPageTokens,
                                     slot % kSwaPageTokens, latent.data());
      for (int64_t h = 0; h < c.heads; ++h)
        for (int64_t d = 0; d < kDims; ++d) {
          const int64_t i = (n * c.heads + h) * kDims + d;
          q.set(i, 0.88 * reference::bf16_to_float(latent[d]) + 0.1 * q.get(i));
        }
    }
  }
  // Sinks around the lse of 128 random keys (about 5.4), so that the sink's share matters.
  HostTensor sink(DType::f32, {c.heads});
  fill_uniform(sink, rng, 0.0, 8.0);
  if (c.scores == Scores::sink_negative || c.scores == Scores::sink_positive)
    for (int64_t h = 0; h < c.heads; ++h) sink.set(h, c.scores == Scores::sink_negative ? -100.0 : 30.0);

  TensorMap inputs;
  inputs.emplace("q", std::move(q));
  inputs.emplace("sink", std::move(sink));
  inputs.emplace("positions", std::move(pos_t));
  inputs.emplace("swa_cache", std::move(swa.bytes));
  inputs.emplace("swa_indices", std::move(swa_indices));
  inputs.emplace("swa_lengths", std::move(swa_lengths));
  if (s.has_extra) {
    inputs.emplace("extra_cache", std::move(extra.bytes));
    inputs.emplace("extra_indices", std::move(extra_indices));
    inputs.emplace("extra_lengths", std::move(extra_lengths));
  }
  return inputs;
}

std::vector<std::string> input_names(const Sizes& s) {
  std::vector<std::string> names = {"q", "sink", "positions", "swa_cache", "swa_indices", "swa_lengths"};
  if (s.has_extra) names.insert(names.end(), {"extra_cache", "extra_indices", "extra_lengths"});
  return names;
}

// A pool is whole pages of its format; its size is the inputs', not the case's (graph padding and
// batch slices keep the pools whole).
int64_t pool_slots(const TensorMap& inputs, const std::string& name, int64_t page_tokens) {
  const auto it = inputs.find(name);
  if (it == inputs.end()) throw BadInput("sparse_attention: input \"" + name + "\" is missing");
  const int64_t page_bytes = reference::model1_page_bytes(page_tokens);
  const HostTensor& t = it->second;
  if (t.dtype() != DType::u8 || t.shape().size() != 1 || t.numel() == 0 || t.numel() % page_bytes)
    throw BadInput("sparse_attention: input \"" + name + "\" must be u8 pages of " + std::to_string(page_bytes) +
                   " bytes, got " + dtype_name(t.dtype()) + shape_string(t.shape()));
  return t.numel() / page_bytes * page_tokens;
}

// The problem the reference solves, over the inputs' buffers.
reference::SparseAttentionProblem problem_of(const AttnCase& c, const TensorMap& inputs) {
  const Sizes s = sizes_of(c);
  reference::SparseAttentionProblem pr;
  pr.rows = c.bs;
  pr.heads = c.heads;
  pr.q = inputs.at("q").data<uint16_t>();
  pr.window = {inputs.at("swa_cache").data<uint8_t>(), kSwaPageTokens, pool_slots(inputs, "swa_cache", kSwaPageTokens),
               inputs.at("swa_indices").data<int32_t>(), kWindow, inputs.at("swa_lengths").data<int32_t>()};
  if (s.has_extra)
    pr.extra = {inputs.at("extra_cache").data<uint8_t>(), s.extra_page_tokens,
                pool_slots(inputs, "extra_cache", s.extra_page_tokens), inputs.at("extra_indices").data<int32_t>(),
                s.extra_width, inputs.at("extra_lengths").data<int32_t>()};
  pr.sink = inputs.at("sink").data<float>();
  pr.positions = inputs.at("positions").data<int32_t>();
  pr.compress_ratio = c.ratio;
  return pr;
}

void validate_inputs(const AttnCase& c, const TensorMap& inputs) {
  const Sizes s = sizes_of(c);
  require_tensor("sparse_attention", inputs, "q", DType::bf16, {c.bs, c.heads, kDims});
  require_tensor("sparse_attention", inputs, "sink", DType::f32, {c.heads});
  require_tensor("sparse_attention", inputs, "positions", DType::i32, {c.bs});
  require_tensor("sparse_attention", inputs, "swa_indices", DType::i32, {c.bs, kWindow});
  require_tensor("sparse_attention", inputs, "swa_lengths", DType::i32, {c.bs});
  pool_slots(inputs, "swa_cache", kSwaPageTokens);
  if (s.has_extra) {
    require_tensor("sparse_attention", inputs, "extra_indices", DType::i32, {c.bs, s.extra_width});
    require_tensor("sparse_attention", inputs, "extra_lengths", DType::i32, {c.bs});
    pool_slots(inputs, "extra_cache", s.extra_page_tokens);
  }
  reject_unknown_inputs("sparse_attention", inputs, input_names(s));
  for (int64_t n = 0; n < c.bs; ++n)
    if (inputs.at("positions").data<int32_t>()[n] < 0)
      throw BadInput("sparse_attention: positions[" + std::to_string(n) + "] < 0");
  // Lengths and the indices inside them: the reference's checks, which name row and column.
  reference::SparseAttentionProblem pr = problem_of(c, inputs);
  pr.heads = 0;  // the gather checks every row; no head is computed
  reference::sparse_attention(pr);
}

// The decode kernels' split over keys (kernels/sparse_attention.h, sparse_attention_splits: the
// same rule): one split per 128 keys of the widest possible row (window + extra width, never bs, so
// that a row's result does not depend on its batch), at most 8; the splits leave their partial
// softmax state (512 accumulators, max, sum per head) in `scratch` to be merged in split order (on
// NVIDIA by the row's last split, unless they merge in their cluster's shared memory; on AMD by a
// second kernel). The scratch is the kernels' working memory, no reader's: unchecked. One split
// needs none (a one-element stand-in), nor do prefill rows (launch_sparse_attention_prefill: a
// block a row).
int64_t splits_of(const AttnCase& c) {
  const int64_t keys = kWindow + sizes_of(c).extra_width;
  return std::clamp<int64_t>((keys + 127) / 128, 1, 8);
}
constexpr int64_t kPartFloats = kDims + 2;

Shape scratch_shape(const AttnCase& c) {
  const int64_t splits = splits_of(c);
  return splits > 1 && !c.prefill ? Shape{c.bs, c.heads, splits, kPartFloats} : Shape{1};
}

TensorMap make_outputs(const AttnCase& c) {
  // out's rows are (query row, head) pairs: its check (row_rel_l2, per row) is per head, as its
  // derivation in checks(), so that one wrong head is not diluted by the row's other heads.
  return {{"out", HostTensor(DType::bf16, {c.bs * c.heads, kDims})},
          {"lse", HostTensor(DType::f32, {c.bs, c.heads})},
          {"scratch", HostTensor(DType::f32, scratch_shape(c))}};
}

void scratch_unchecked(const AttnCase&, TensorMap& outputs, Poison poison) {
  fill_poison(outputs.at("scratch"), poison);
}

void run_reference(const AttnCase& c, const TensorMap& inputs, TensorMap& outputs) {
  const reference::SparseAttentionResult r = reference::sparse_attention(problem_of(c, inputs));
  HostTensor& out = outputs.at("out");
  HostTensor& lse = outputs.at("lse");
  for (int64_t i = 0; i < out.numel(); ++i) out.set(i, r.out[static_cast<size_t>(i)]);
  for (int64_t i = 0; i < lse.numel(); ++i) lse.set(i, r.lse[static_cast<size_t>(i)]);
}

// A captured graph's padded rows are spec 6.2's padding rows (position 0, lengths 1) whose only
// index is -1: rows with no valid key, which must come out 0 with a finite lse, not NaN. The pools
// grow (zero pages, never read) to the bucket's capacity: every padded input has the bucket's shape.
TensorMap pad_batch(const AttnCase& c, const TensorMap& inputs, int64_t bucket) {
  if (bucket < c.bs) throw BadInput("sparse_attention: bucket " + std::to_string(bucket) + " < bs");
  const Sizes s = sizes_of(c);
  const Case bucket_case = c.untyped().with("bs", std::to_string(bucket));
  const Capacities cap = capacities_of(AttnCase(bucket_case));
  TensorMap padded;
  for (const auto& [name, t] : inputs) {
    if (name == "sink") {
      padded.emplace(name, t);
      continue;
    }
    if (name == "swa_cache" || name == "extra_cache") {
      const int64_t bytes = name == "swa_cache" ? pool_bytes(cap.swa, kSwaPageTokens) : pool_bytes(cap.extra, s.extra_page_tokens);
      if (bytes < t.numel()) throw BadInput("sparse_attention: input \"" + name + "\" larger than the bucket's pool");
      HostTensor p(DType::u8, {bytes});
      std::memset(p.bytes(), 0, static_cast<size_t>(bytes));
      std::memcpy(p.bytes(), t.bytes(), t.nbytes());
      padded.emplace(name, std::move(p));
      continue;
    }
    Shape shape = t.shape();
    shape[0] = bucket;
    HostTensor p(t.dtype(), shape);
    std::memcpy(p.bytes(), t.bytes(), t.nbytes());
    for (int64_t i = t.numel(); i < p.numel(); ++i) {
      if (name == "q") p.set(i, NAN);
      else if (name == "positions") p.data<int32_t>()[i] = 0;
      else if (name == "swa_lengths" || name == "extra_lengths") p.data<int32_t>()[i] = 1;
      else p.data<int32_t>()[i] = -1;  // the index lists
    }
    padded.emplace(name, std::move(p));
  }
  return padded;
}

// FlashMLA's count: every distinct KV entry read once (584 B), q read and the output written;
// 2 * heads * attended * (512 + 512) FLOPs for the scores and the weighted sum.
WorkCount work(const AttnCase& c, const TensorMap& inputs) {
  const reference::SparseAttentionProblem pr = problem_of(c, inputs);
  double entries = 0, attended = 0;
  for (const reference::AttentionScope* scope : {&pr.window, &pr.extra}) {
    if (scope->cache == nullptr) continue;
    std::vector<int32_t> seen;
    for (int64_t n = 0; n < c.bs; ++n)
      for (int64_t j = 0; j < scope->lengths[n]; ++j) {
        const int32_t slot = scope->indices[n * scope->width + j];
        if (slot == -1) continue;
        ++attended;
        seen.push_back(slot);
      }
    std::sort(seen.begin(), seen.end());
    entries += static_cast<double>(std::unique(seen.begin(), seen.end()) - seen.begin());
  }
  const double rows_heads = static_cast<double>(c.bs * c.heads);
  return {entries * kModel1TokenBytes + rows_heads * (kDims * 2 * 2 + 4),
          2.0 * static_cast<double>(c.heads) * attended * (kDims + kDims)};
}

// out: bf16 under row_rel_l2, a row per (query row, head) (make_outputs' [bs * heads, 512]): its
// elements are softmax-weighted sums of 640 or more latents whose terms cancel, so an element near
// zero has no bound of its own; a head's error is the kernel's fp32 error (about sqrt(K) u of the
// head's 512 values) plus both sides' bf16 rounding (2^-8 relative each): within
// bf16_rounded_once's 2^-7 per head.
// lse: fp32, per row of heads under fp32_accumulated with K = 512 + the row's widest key count.
// Its error is the scores' rounding (512-term fp32 dot products of exact bf16 x scaled-fp8
// products) carried through the softmax weights (a weighted mean of the scores' errors), plus that
// of the sum of at most 128 + width exponentials and of the log. The first is fp32_accumulated's
// random-walk bound relative to the scores' size, which the lse (the largest score plus log of the
// sum, >= the largest score) follows unless the scores cancel to near zero; the second has a worst
// case of (2K + 4) u absolute (fp32_lse's derivation, K the key count) but, its terms positive and
// its roundings of mean zero, a typical size of sqrt(K/9) u: inside (4 sqrt(K) + 1) u of an lse of
// 1 or more. A CPU emulation of the scalar kernel (AMD) used at most 1.1% of this bound on the
// verify cases. The tensor-core kernel (NVIDIA: 64-dim chunks of exact products summed into fp32
// scores, the weights entering P x V as bf16 hi + lo; decode rows split per 128 keys and merged)
// keeps to the same classes: its CPU emulation (tests/cpu/test_sparse_attention_mma_reference.cpp)
// uses at most 12% of out's row bound, with 99.8% exact agreement, and 1.3% of lse's, on the
// prefill and the decode verify cases alike.
std::map<std::string, OutputCheck> checks(const AttnCase& c) {
  const int64_t keys = kWindow + sizes_of(c).extra_width;
  return {{"out", {ToleranceClass::bf16_rounded_once, Comparator::row_rel_l2, 0, ""}},
          {"lse", {ToleranceClass::fp32_accumulated, Comparator::row_rel_l2, kDims + keys, ""}}};
}

// Rows are independent requests: a slice keeps the pools and the sinks whole.
BatchSlice slice_batch(const AttnCase& c, const TensorMap& inputs, int64_t begin, int64_t end) {
  BatchSlice slice{c.untyped().with("bs", std::to_string(end - begin)), {}, {{"out", begin * c.heads}, {"lse", begin}}};
  for (const auto& [name, t] : inputs)
    slice.inputs.emplace(name, name == "sink" || name == "swa_cache" || name == "extra_cache" ? t : t.rows(begin, end));
  return slice;
}

#if DSV4H_GPU_LAYER
void launch(const AttnCase& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream) {
  const Sizes s = sizes_of(c);
  SparseAttentionArgs args;
  args.q = inputs.data<const uint16_t>("q");
  args.window = {inputs.data<const uint8_t>("swa_cache"), kSwaPageTokens, inputs.data<const int32_t>("swa_indices"),
                 kWindow, inputs.data<const int32_t>("swa_lengths")};
  if (s.has_extra)
    args.extra = {inputs.data<const uint8_t>("extra_cache"), s.extra_page_tokens,
                  inputs.data<const int32_t>("extra_indices"), s.extra_width, inputs.data<const int32_t>("extra_lengths")};
  args.sink = inputs.data<const float>("sink");
  args.positions = inputs.data<const int32_t>("positions");
  args.out = outputs.data<uint16_t>("out");
  args.lse = outputs.data<float>("lse");
  args.scratch = outputs.data<float>("scratch");
  args.scratch_floats = shape_numel(outputs.at("scratch").shape);
  args.rows = c.bs;
  args.heads = c.heads;
  args.compress_ratio = c.ratio;
  // Prefill rows (one request's tokens) go to the throughput kernel, decode rows to the decode one.
  if (c.prefill) launch_sparse_attention_prefill(args, static_cast<hipStream_t>(stream));
  else launch_sparse_attention(args, static_cast<hipStream_t>(stream));
}
#endif

}  // namespace

Component sparse_attention_component() {
  Descriptor<Params> d;
  d.name = "sparse_attention";
  d.summary = "DeepSeek-V4 attention: one softmax with the head's sink over the window and the C4/C128 entries, FP8 pools (spec 3.4, 9.2)";
  d.verify_cases = {
      // The window not yet full, full, and sliding (spec 3.4's edge cases), ratio 0.
      "sparse_attention(bs=2,ratio=0,pos=0)",
      "sparse_attention(bs=2,ratio=0,pos=60)",
      "sparse_attention(bs=2,ratio=0,pos=127)",
      "sparse_attention(bs=2,ratio=0,pos=128)",
      "sparse_attention(bs=2,ratio=0,pos=129,heads=128)",
      // C4 with 0, 1, 511, 512 and 513 visible entries ((p+1)/4), and the 1024-wide selection.
      "sparse_attention(bs=2,ratio=4,pos=2)",
      "sparse_attention(bs=2,ratio=4,pos=3)",
      "sparse_attention(bs=2,ratio=4,pos=2046)",
      "sparse_attention(bs=2,ratio=4,pos=2047)",
      "sparse_attention(bs=2,ratio=4,pos=2051)",
      "sparse_attention(bs=2,ratio=4,pos=4099,ctx=8192,index_topk=1024,heads=128,holes=0)",
      // C128 with p+1 in {127, 128, 129, 256}.
      "sparse_attention(bs=2,ratio=128,pos=126)",
      "sparse_attention(bs=2,ratio=128,pos=127)",
      "sparse_attention(bs=2,ratio=128,pos=128)",
      "sparse_attention(bs=2,ratio=128,pos=255)",
      // Random lengths, rows split over 1 to 5 blocks; on a 132-SM card the decode launcher's head
      // groups of 16 (bs 2), 32 (bs 9) and 64 heads (bs 64; bs 33 with 128 heads).
      "sparse_attention(bs=9,ratio=4,ctx=3000)",
      "sparse_attention(bs=9,ratio=128,ctx=40000)",
      "sparse_attention(bs=9,ratio=0,ctx=300)",
      "sparse_attention(bs=64,ratio=4,ctx=3000)",
      "sparse_attention(bs=33,heads=128,ratio=128,ctx=30000)",
      // Head groups of 48 (the fourth head tile of a block idle in the split path); 4 of a row's 5
      // splits holding only masked keys (holes=1: every selected entry -1); 8 splits, the cap (2174
      // keys of C128 at 262000: 34 tiles of 64, four or five a split).
      "sparse_attention(bs=64,heads=48,ratio=4,ctx=3000)",
      "sparse_attention(bs=2,ratio=4,pos=2051,holes=1)",
      "sparse_attention(bs=3,ratio=128,pos=262000,ctx=300000,heads=16)",
      // Adversarial scores.
      "sparse_attention(bs=3,ratio=4,ctx=3000,scores=1)",
      "sparse_attention(bs=3,ratio=128,ctx=3000,scores=2)",
      "sparse_attention(bs=3,ratio=4,ctx=3000,scores=3)",
      "sparse_attention(bs=3,ratio=0,ctx=3000,scores=4)",
      // Padding rows: no valid key, 0 and a finite lse.
      "sparse_attention(bs=5,ratio=4,ctx=3000,padding=2)",
      "sparse_attention(bs=3,ratio=0,ctx=100,padding=3)",
      // Prefill (launch_sparse_attention_prefill: a block per row, no split): one request's consecutive
      // tokens, crossing 512 visible C4 entries and the C128 and window boundaries (p = 127, 128,
      // 129; C4 with 0, 1, 511, 512, 513 entries; C128 p + 1 = 127, 128, 129, 256), every block
      // head count (64, 48, 32, 16: the largest dividing heads), the 1024-wide selection (18 key
      // tiles), adversarial scores and padding rows.
      "sparse_attention(bs=40,ratio=4,prefill=1,pos=2030,ctx=4096)",
      "sparse_attention(bs=40,ratio=128,prefill=1,pos=100,ctx=4096,heads=16)",
      "sparse_attention(bs=30,ratio=0,prefill=1,pos=110)",
      "sparse_attention(bs=8,ratio=4,prefill=1,pos=0,ctx=64)",
      "sparse_attention(bs=6,ratio=0,prefill=1,pos=125,heads=128)",
      "sparse_attention(bs=5,ratio=128,prefill=1,pos=253,ctx=4096,heads=48)",
      "sparse_attention(bs=12,ratio=4,prefill=1,pos=2041,ctx=4096,heads=32)",
      "sparse_attention(bs=4,ratio=4,prefill=1,pos=4097,ctx=8192,index_topk=1024,heads=128,holes=0)",
      "sparse_attention(bs=64,ratio=4,prefill=1,ctx=3000)",
      "sparse_attention(bs=8,ratio=4,prefill=1,ctx=3000,scores=1)",
      "sparse_attention(bs=8,ratio=128,prefill=1,ctx=3000,scores=2)",
      "sparse_attention(bs=8,ratio=4,prefill=1,ctx=3000,scores=3)",
      "sparse_attention(bs=8,ratio=0,prefill=1,ctx=3000,scores=4)",
      "sparse_attention(bs=10,ratio=4,prefill=1,ctx=3000,padding=3)",
  };
  d.batch_param = "bs";
  // 16 heads, and 192 entries for up to three key splits (the split path and its scratch replay too): replay
  // compares every bucket row for each batch 1..256, and at 64 heads and three splits that was over
  // 250 s of host work on the 2026-12-06 H100 run.
  d.replay_case = "sparse_attention(bs=1,ratio=4,ctx=1024,heads=16,index_topk=192)";
  d.mutants = {
      DSV4H_MUTANT(sink_ignored, "sparse_attention.hip sparse_attention_mma.hip", "the sink left out of the denominator (SGLang's SM120 fallback, spec 9.2)"),
      DSV4H_MUTANT(sink_in_numerator, "sparse_attention.hip sparse_attention_mma.hip", "exp(sink - m) added to the numerator too"),
      DSV4H_MUTANT(minus_one_unmasked, "sparse_attention.hip sparse_attention_mma.hip", "-1 inside the length read as a zero key with score 0 (spec 9.2)"),
      DSV4H_MUTANT(c4_one_too_many, "sparse_attention.hip sparse_attention_mma.hip", "one compressed entry more than the row's length: entry (p+1)/4 visible (the caller's length off by one, modelled in the kernel)"),
      DSV4H_MUTANT(window_short, "sparse_attention.hip sparse_attention_mma.hip", "the window p-126..p: one entry short"),
      DSV4H_MUTANT(rope_not_inverted, "sparse_attention.hip sparse_attention_mma.hip", "the output's rope slice not de-rotated"),
      DSV4H_MUTANT(empty_row_nan, "sparse_attention.hip sparse_attention_mma.hip", "a row with no valid key writes 0/0 = NaN"),
      DSV4H_MUTANT(scale_448, "sparse_attention.hip sparse_attention_mma.hip", "softmax scale 1/sqrt(448) instead of 1/sqrt(512)"),
      // The split decode's own protocol and merge (not spec bugs): the scratch merge's count left at
      // its last arrival, so that no split of the next launch merges and the outputs stay
      // unwritten; the row's last split left out of the outputs' sums (its sum l still counted).
      DSV4H_MUTANT(split_arrival_not_reset, "sparse_attention_mma.hip", "the splits' arrival count not reset after the merge"),
      DSV4H_MUTANT(split_merge_one_short, "sparse_attention_mma.hip", "the splits' merge leaves the row's last split out"),
  };
  d.gpu_tests = "SparseAttentionGpu.*";
  d.bench_binary = "bench_sparse_attention";
  d.bench_filter =
      "BM_sparse_attention|BM_copy_same_bytes_attention|BM_copy_kernel_same_bytes_attention|BM_dense_bf16_same_flops_attention|BM_empty_kernel";
  // Issue 30's goals (ci/goals.py). The peers' prefill results carry bs and ctx as their case's
  // (both the token count), which names no decode benchmark: the decode peer goal skips them.
  // Prefill's fraction of the dense bf16 rate is a time ratio: at
  // least 0.40 of the rate is at most 2.5 times the time a dense bf16 GEMM (cuBLAS, the same run)
  // takes for the same FLOPs. Not encoded yet: the compute-bound decode shapes' fraction of the
  // dense rate, and 4x the best peer at bs 128 (a per-shape bound over the peers' list).
  d.goals = R"json([
    {"text": "decode {layer} ctx={ctx} bs={bs}: >= 85% of copy bandwidth", "measure": "copy_fraction", "bound": 0.85,
     "benchmark": "BM_sparse_attention/bs:{bs}/ratio:{ratio}/ctx:{ctx}/manual_time",
     "each": [[{"bs": 1}, {"bs": 8}, {"bs": 64}, {"bs": 128}, {"bs": 256}],
              [{"ratio": 4, "layer": "C4"}, {"ratio": 128, "layer": "C128"}],
              [{"ctx": 8192}, {"ctx": 65536}]],
     "floors": ["BM_copy_same_bytes_attention/bs:{bs}/ratio:{ratio}/ctx:{ctx}/manual_time",
                "BM_copy_kernel_same_bytes_attention/bs:{bs}/ratio:{ratio}/ctx:{ctx}/manual_time"]},
    {"text": "decode {layer} bs=1 ctx=8K: within 1.5x of one kernel reading the same bytes", "measure": "time_ratio",
     "bound": 1.5, "benchmark": "BM_sparse_attention/bs:1/ratio:{ratio}/ctx:8192/manual_time",
     "over": "BM_copy_kernel_same_bytes_attention/bs:1/ratio:{ratio}/ctx:8192/manual_time",
     "each": [[{"ratio": 4, "layer": "C4"}, {"ratio": 128, "layer": "C128"}]]},
    {"text": "decode {layer} bs=1 ctx=8K: <= 8 us", "measure": "max_us", "bound": 8,
     "benchmark": "BM_sparse_attention/bs:1/ratio:{ratio}/ctx:8192/manual_time",
     "each": [[{"ratio": 4, "layer": "C4"}, {"ratio": 128, "layer": "C128"}]],
     "floors": ["BM_copy_kernel_same_bytes_attention/bs:1/ratio:{ratio}/ctx:8192/manual_time"]},
    {"text": "decode ratio={ratio} ctx={ctx} bs={bs}: ahead of every peer", "measure": "faster_than_peers", "bound": 1.0,
     "peers": "peers.sparse_attention", "where": {"prefill": null},
     "benchmark": "BM_sparse_attention/bs:{bs}/ratio:{ratio}/ctx:{ctx}/manual_time"},
    {"text": "prefill {layer} 8K tokens: >= 40% of the dense bf16 rate (<= 2.5x a dense GEMM's time for its FLOPs)",
     "measure": "time_ratio", "bound": 2.5, "benchmark": "BM_sparse_attention_prefill/tokens:8192/ratio:{ratio}/manual_time",
     "over": "BM_dense_bf16_same_flops_attention_prefill/tokens:8192/ratio:{ratio}/manual_time",
     "each": [[{"ratio": 4, "layer": "C4"}, {"ratio": 128, "layer": "C128"}]]},
    {"text": "prefill ratio={ratio} tokens={tokens}: ahead of every peer", "measure": "faster_than_peers", "bound": 1.0,
     "peers": "peers.sparse_attention", "where": {"prefill": 1},
     "benchmark": "BM_sparse_attention_prefill/tokens:{tokens}/ratio:{ratio}/manual_time"}
  ])json";
  d.make_inputs = make_inputs;
  d.validate_inputs = validate_inputs;
  d.make_outputs = make_outputs;
  d.reference = run_reference;
  d.pad_batch = pad_batch;
  d.work = work;
  d.checks = checks;
  d.unchecked = scratch_unchecked;
  d.slice_batch = slice_batch;
  d.relation_cases = {
      "batch_invariance(chunks=3):sparse_attention(bs=9,ratio=4,ctx=3000)",
      "batch_invariance(chunks=4):sparse_attention(bs=12,ratio=128,ctx=20000,heads=16)",
      // Decode rows in 64-head groups (the whole batch) against 16-head groups (its chunks).
      "batch_invariance(chunks=16):sparse_attention(bs=64,ratio=4,ctx=3000)",
      // Prefill rows: a row alone and in chunks, bitwise (the prefill launch computes each row alone).
      "batch_invariance(chunks=5):sparse_attention(bs=24,ratio=4,prefill=1,ctx=4096,heads=16)",
      "batch_invariance(chunks=3):sparse_attention(bs=12,ratio=128,prefill=1,ctx=4096)",
  };
#if DSV4H_GPU_LAYER
  d.gpu = launch;
#endif
  return erase(std::move(d));
}

}  // namespace dsv4h
