// Descriptor of `memory_pool`: one forward step's writes into the DeepSeek-V4 KV memory pool (spec
// 5; review finding 5). Translate the step's out locations once (swa via full_to_swa, c4 and c128
// by arithmetic), then let every layer of this pipeline stage store, in a given order, its SWA
// latent (MODEL1 584 B), its compressed latent (c4 / c128 layers) and its indexer key (c4 layers,
// 132 B). The pools are outputs, poisoned before the run, so a byte written where it should not
// be shows up as a mismatch.
//
// The pools travel as i32 words, not u8: every entry, data section and scale section starts and
// ends on a 4-byte boundary, and an i32 poison sentinel is hit by packed bytes once in 2^32 words,
// where a u8 sentinel would be hit once in 256 bytes and read as "unwritten".
//
// Inputs come from the allocator model: requests with a random history, then this step's tokens
// (`per_request` a request: 1 = decode). `stale_swa_loc` is the translation a previous step left
// behind (the previous token's SWA slot); only the pool_cached_loc mutant reads it, as SGLang's
// cached_loc.
#include "memory_pool.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>

#include "../../reference/kv_cache_indexer.h"
#include "../../reference/kv_cache_model1.h"
#include "../../reference/kv_pool.h"
#include "../../reference/kv_pool_allocator.h"
#include "../compare.h"
#include "../descriptor.h"
#include "../errors.h"
#include "../random.h"
#if DSV4H_GPU_LAYER
#include "../gpu/launchers.h"
#endif

namespace dsv4h {
namespace {

using reference::PoolKind;

std::string str(int64_t v) { return std::to_string(v); }

Shape pool_shape(PoolKind kind, const MemoryPoolSizes& s) {
  const int64_t pages = kind == PoolKind::swa ? s.swa_pages : s.full_pages;
  return {reference::pool_layers(kind, static_cast<int>(s.layers)), pages * reference::pool_page_bytes(kind, s.swa_page) / 4};
}

const char* pool_output(PoolKind kind) {
  switch (kind) {
    case PoolKind::swa: return "swa_pool";
    case PoolKind::c4: return "c4_pool";
    case PoolKind::c128: return "c128_pool";
    case PoolKind::indexer: return "indexer_pool";
  }
  return "?";
}

// A row's values at a random power-of-two scale, so that a batch covers many scale exponents.
void fill_rows(HostTensor& t, int64_t row_elements, Rng& rng) {
  for (int64_t row = 0; row < t.numel() / row_elements; ++row) {
    const double scale = std::ldexp(1.0, static_cast<int>(rng.integer(-24, 24)));
    for (int64_t i = 0; i < row_elements; ++i) t.set(row * row_elements + i, rng.normal() * scale);
  }
}

TensorMap make_inputs(const MemoryPoolCase& c) {
  const MemoryPoolSizes s = memory_pool_sizes(c);
  reference::PoolAllocator pool({s.full_pages, s.swa_pages, s.swa_page, s.window});
  Rng rng(c.seed());
  HostTensor out_loc(DType::i32, {s.tokens}), seq_lens(DType::i32, {s.tokens}), stale(DType::i32, {s.tokens});
  try {
    for (int64_t row = 0; row < s.tokens;) {
      const int64_t request = pool.add_request(), prior = rng.integer(0, s.history);
      const int64_t n = std::min(s.per_request, s.tokens - row);
      pool.extend(request, prior);
      const std::vector<int32_t> locs = pool.extend(request, n);
      for (int64_t k = 0; k < n; ++k, ++row) {
        const int64_t pos = prior + k;
        out_loc.data<int32_t>()[row] = rng.uniform() < s.invalid ? -1 : locs[static_cast<size_t>(k)];
        seq_lens.data<int32_t>()[row] = static_cast<int32_t>(pos + 1);
        stale.data<int32_t>()[row] = pos > 0 ? pool.swa_loc(request, pos - 1) : 0;
      }
    }
  } catch (const reference::PoolExhausted& e) {
    throw BadInput(std::string(e.what()) + " (pool too small for " + c.str() + ": raise full_pages or swa_pages)");
  }
  HostTensor full_to_swa(DType::i32, {s.full_slots()});
  std::memcpy(full_to_swa.bytes(), pool.full_to_swa().data(), full_to_swa.nbytes());
  HostTensor kv(DType::bf16, {s.layers, s.tokens, reference::kModel1Dims});
  HostTensor compressed_kv(DType::bf16, {s.layers, s.tokens, reference::kModel1Dims});
  HostTensor index_k(DType::bf16, {s.layers, s.tokens, reference::kIndexerDims});
  fill_rows(kv, reference::kModel1Dims, rng);
  fill_rows(compressed_kv, reference::kModel1Dims, rng);
  fill_rows(index_k, reference::kIndexerDims, rng);
  TensorMap inputs;
  inputs["full_to_swa"] = std::move(full_to_swa);
  inputs["out_cache_loc"] = std::move(out_loc);
  inputs["seq_lens"] = std::move(seq_lens);
  inputs["stale_swa_loc"] = std::move(stale);
  inputs["kv"] = std::move(kv);
  inputs["compressed_kv"] = std::move(compressed_kv);
  inputs["index_k"] = std::move(index_k);
  return inputs;
}

std::map<std::string, std::pair<DType, Shape>> input_schema(const MemoryPoolSizes& s) {
  return {{"full_to_swa", {DType::i32, {s.full_slots()}}},
          {"out_cache_loc", {DType::i32, {s.tokens}}},
          {"seq_lens", {DType::i32, {s.tokens}}},
          {"stale_swa_loc", {DType::i32, {s.tokens}}},
          {"kv", {DType::bf16, {s.layers, s.tokens, reference::kModel1Dims}}},
          {"compressed_kv", {DType::bf16, {s.layers, s.tokens, reference::kModel1Dims}}},
          {"index_k", {DType::bf16, {s.layers, s.tokens, reference::kIndexerDims}}}};
}

void validate_inputs(const MemoryPoolCase& c, const TensorMap& inputs) {
  const MemoryPoolSizes s = memory_pool_sizes(c);
  const auto schema = input_schema(s);
  for (const auto& [name, t] : inputs)
    if (schema.count(name) == 0) throw BadInput("memory_pool: unknown input \"" + name + "\"");
  for (const auto& [name, spec] : schema) {
    auto it = inputs.find(name);
    if (it == inputs.end()) throw BadInput("memory_pool: input \"" + name + "\" is missing");
    if (it->second.dtype() != spec.first || it->second.shape() != spec.second)
      throw BadInput("memory_pool: input \"" + name + "\" is " + dtype_name(it->second.dtype()) +
                     shape_string(it->second.shape()) + ", the case needs " + dtype_name(spec.first) +
                     shape_string(spec.second));
  }
  const int32_t* stored_loc = inputs.at("out_cache_loc").data<int32_t>();
  // The FP8 formats scale by the amax of each tile, which a NaN or an infinity leaves undefined
  // (upstream's quantisers do not say what to store): a stored row's values must be finite. Rows
  // that store nothing (-1, or the sink 0 of graph padding, which holds NaN on purpose) may hold any.
  for (const char* name : {"kv", "compressed_kv", "index_k"}) {
    const HostTensor& t = inputs.at(name);
    const int64_t dims = t.shape()[2];
    for (int64_t i = 0; i < t.numel(); ++i)
      if (stored_loc[(i / dims) % s.tokens] > 0 && !std::isfinite(t.get(i)))
        throw BadInput("memory_pool: " + std::string(name) + t.index_string(i) + " = " + format_value(t.get(i)) +
                       ": the FP8 cache formats hold finite values only");
  }
  const int32_t* map = inputs.at("full_to_swa").data<int32_t>();
  for (int64_t i = 0; i < s.full_slots(); ++i)
    if (map[i] < 0 || map[i] >= s.swa_slots())
      throw BadInput("memory_pool: full_to_swa[" + str(i) + "] = " + str(map[i]) + " (swa page " +
                     str(map[i] / s.swa_page) + ") is outside the swa pool of " + str(s.swa_pages) + " pages");
  const int32_t* loc = inputs.at("out_cache_loc").data<int32_t>();
  const int32_t* len = inputs.at("seq_lens").data<int32_t>();
  const int32_t* stale = inputs.at("stale_swa_loc").data<int32_t>();
  // Two rows storing to one slot would leave it holding whichever came last (on the GPU, a race).
  std::map<int32_t, int64_t> swa_rows, full_rows, c4_rows, c128_rows;
  for (int64_t i = 0; i < s.tokens; ++i) {
    if (loc[i] < -1 || loc[i] >= s.full_slots())
      throw BadInput("memory_pool: out_cache_loc[" + str(i) + "] = " + str(loc[i]) + " is outside the full pool [0, " +
                     str(s.full_slots()) + ") and is not -1");
    if (len[i] < 1) throw BadInput("memory_pool: seq_lens[" + str(i) + "] = " + str(len[i]) + " must be >= 1");
    if (stale[i] < 0 || stale[i] >= s.swa_slots())
      throw BadInput("memory_pool: stale_swa_loc[" + str(i) + "] = " + str(stale[i]) + " is outside the swa pool");
    if (loc[i] > 0 && !full_rows.emplace(loc[i], i).second)
      throw BadInput("memory_pool: out_cache_loc rows " + str(full_rows[loc[i]]) + " and " + str(i) + " both hold " + str(loc[i]));
    const int32_t swa = loc[i] >= 0 ? map[loc[i]] : 0;
    if (swa > 0 && !swa_rows.emplace(swa, i).second)
      throw BadInput("memory_pool: rows " + str(swa_rows[swa]) + " and " + str(i) + " both store to swa slot " + str(swa));
    for (auto [ratio, rows] : {std::pair{4, &c4_rows}, std::pair{128, &c128_rows}}) {
      const int32_t slot = reference::compressed_out_loc(loc[i], len[i], ratio);
      if (slot > 0 && !rows->emplace(slot, i).second)
        throw BadInput("memory_pool: rows " + str(rows->at(slot)) + " and " + str(i) + " both store to c" + str(ratio) +
                       " slot " + str(slot) + " (out_cache_loc " + str(loc[i]) + ", seq_len " + str(len[i]) + ")");
    }
  }
}

TensorMap make_outputs(const MemoryPoolCase& c) {
  const MemoryPoolSizes s = memory_pool_sizes(c);
  TensorMap out;
  for (const char* name : {"swa_out_loc", "c4_out_loc", "c128_out_loc"}) out[name] = HostTensor(DType::i32, {s.tokens});
  for (PoolKind kind : reference::kPoolKinds) out[pool_output(kind)] = HostTensor(DType::i32, pool_shape(kind, s));
  return out;
}

// The page of `slot` in layer `local_layer` of a pool output, as bytes.
uint8_t* page_of(HostTensor& pool, PoolKind kind, const MemoryPoolSizes& s, int local_layer, int64_t slot) {
  const int64_t page_bytes = reference::pool_page_bytes(kind, s.swa_page);
  const int64_t per_page = reference::pool_tokens_per_page(kind, s.swa_page);
  return pool.bytes() + local_layer * pool.shape()[1] * 4 + slot / per_page * page_bytes;
}

void run_reference(const MemoryPoolCase& c, const TensorMap& inputs, TensorMap& outputs) {
  const MemoryPoolSizes s = memory_pool_sizes(c);
  const auto vec = [&](const char* name) {
    const HostTensor& t = inputs.at(name);
    return std::vector<int32_t>(t.data<int32_t>(), t.data<int32_t>() + t.numel());
  };
  const std::vector<int32_t> out_loc = vec("out_cache_loc"), seq_lens = vec("seq_lens");
  const std::vector<int32_t> swa = reference::translate_swa(vec("full_to_swa"), out_loc);
  std::vector<int32_t> c4(swa.size()), c128(swa.size());
  for (size_t i = 0; i < swa.size(); ++i) {
    c4[i] = reference::compressed_out_loc(out_loc[i], seq_lens[i], 4);
    c128[i] = reference::compressed_out_loc(out_loc[i], seq_lens[i], 128);
  }
  std::memcpy(outputs.at("swa_out_loc").bytes(), swa.data(), swa.size() * 4);
  std::memcpy(outputs.at("c4_out_loc").bytes(), c4.data(), c4.size() * 4);
  std::memcpy(outputs.at("c128_out_loc").bytes(), c128.data(), c128.size() * 4);

  const uint16_t* kv = inputs.at("kv").data<uint16_t>();
  const uint16_t* ckv = inputs.at("compressed_kv").data<uint16_t>();
  const uint16_t* index_k = inputs.at("index_k").data<uint16_t>();
  const auto store_model1 = [&](PoolKind kind, int layer, const uint16_t* rows, const std::vector<int32_t>& locs) {
    const int local = reference::pool_local_layer(kind, layer);
    const int64_t per_page = reference::pool_tokens_per_page(kind, s.swa_page);
    for (int64_t i = 0; i < s.tokens; ++i)
      if (locs[static_cast<size_t>(i)] > 0)
        reference::model1_pack_token(rows + (layer * s.tokens + i) * reference::kModel1Dims, per_page,
                                     locs[static_cast<size_t>(i)] % per_page,
                                     page_of(outputs.at(pool_output(kind)), kind, s, local, locs[static_cast<size_t>(i)]));
  };
  for (int layer : memory_pool_store_order(c)) {
    store_model1(PoolKind::swa, layer, kv, swa);
    const int ratio = reference::layer_compress_ratio(layer);
    if (ratio == 128) store_model1(PoolKind::c128, layer, ckv, c128);
    if (ratio != 4) continue;
    store_model1(PoolKind::c4, layer, ckv, c4);
    const int local = reference::pool_local_layer(PoolKind::indexer, layer);
    for (int64_t i = 0; i < s.tokens; ++i)
      if (c4[static_cast<size_t>(i)] > 0)
        reference::indexer_pack_entry(index_k + (layer * s.tokens + i) * reference::kIndexerDims, 64,
                                      c4[static_cast<size_t>(i)] % 64,
                                      page_of(outputs.at("indexer_pool"), PoolKind::indexer, s, local, c4[static_cast<size_t>(i)]));
  }
}

// Slot 0 of every pool layer, its data bytes and its scale bytes: the sink, which no reader looks at.
// The reference stores nothing there; a kernel may store its padded and non-completing rows there,
// as SGLang's do (spec 5.2: "otherwise the write target is slot 0").
void sink_unchecked(const MemoryPoolCase& c, TensorMap& outputs, Poison poison) {
  const MemoryPoolSizes s = memory_pool_sizes(c);
  const uint64_t bits = poison_bits(DType::i32, poison);
  for (PoolKind kind : reference::kPoolKinds) {
    HostTensor& pool = outputs.at(pool_output(kind));
    const int64_t per_page = reference::pool_tokens_per_page(kind, s.swa_page);
    const int64_t data_bytes = reference::pool_entry_data_bytes(kind);
    const int64_t scale_bytes = reference::pool_entry_bytes(kind) - data_bytes;
    for (int64_t layer = 0; layer < pool.shape()[0]; ++layer) {
      const int64_t row = layer * pool.shape()[1];
      for (int64_t word = 0; word < data_bytes / 4; ++word) pool.set_bits(row + word, bits);
      for (int64_t word = 0; word < scale_bytes / 4; ++word) pool.set_bits(row + per_page * data_bytes / 4 + word, bits);
    }
  }
}

// An engine pads a captured step with rows whose out location is 0 (the sink) and length 1 (no
// compressed block completes): they store nothing but, perhaps, the sink. Their latents are NaN,
// which a store anywhere else would show. Inputs not given are not padded: a composed step's stage
// is handed the inputs it owns (the locations and lengths come from the metadata there).
TensorMap pad_batch(const MemoryPoolCase& c, const TensorMap& inputs, int64_t bucket) {
  const MemoryPoolSizes s = memory_pool_sizes(c);
  if (bucket < s.tokens) throw BadInput("memory_pool: bucket " + str(bucket) + " < tokens " + str(s.tokens));
  TensorMap padded;
  if (inputs.count("full_to_swa")) padded["full_to_swa"] = inputs.at("full_to_swa");
  for (const char* name : {"out_cache_loc", "seq_lens", "stale_swa_loc"}) {
    if (!inputs.count(name)) continue;
    HostTensor t(DType::i32, {bucket});
    std::memcpy(t.bytes(), inputs.at(name).bytes(), static_cast<size_t>(s.tokens) * 4);
    for (int64_t r = s.tokens; r < bucket; ++r) t.data<int32_t>()[r] = std::string(name) == "seq_lens" ? 1 : 0;
    padded[name] = std::move(t);
  }
  for (const char* name : {"kv", "compressed_kv", "index_k"}) {
    if (!inputs.count(name)) continue;
    const HostTensor& real = inputs.at(name);
    const int64_t dims = real.shape()[2];
    HostTensor t(DType::bf16, {s.layers, bucket, dims});
    for (int64_t layer = 0; layer < s.layers; ++layer) {
      std::memcpy(t.bytes() + layer * bucket * dims * 2, real.bytes() + layer * s.tokens * dims * 2,
                  static_cast<size_t>(s.tokens * dims * 2));
      for (int64_t i = s.tokens * dims; i < bucket * dims; ++i) t.set(layer * bucket * dims + i, NAN);
    }
    padded[name] = std::move(t);
  }
  return padded;
}

WorkCount work(const MemoryPoolCase& c, const TensorMap& inputs) {
  const MemoryPoolSizes s = memory_pool_sizes(c);
  const int32_t* loc = inputs.at("out_cache_loc").data<int32_t>();
  const int32_t* map = inputs.at("full_to_swa").data<int32_t>();
  const int32_t* len = inputs.at("seq_lens").data<int32_t>();
  // Translation: read out_cache_loc, seq_lens and a mapping entry, write three locations.
  double bytes = static_cast<double>(s.tokens) * 24;
  for (int layer : memory_pool_store_order(c)) {
    const int ratio = reference::layer_compress_ratio(layer);
    for (int64_t i = 0; i < s.tokens; ++i) {
      const bool swa = loc[i] >= 0 && map[loc[i]] > 0, block = loc[i] >= 0 && ratio > 0 && len[i] % ratio == 0;
      bytes += 4 + (swa ? 1024 + 584 : 0) + (block ? 1024 + 584 : 0) + (block && ratio == 4 ? 256 + 132 : 0);
    }
  }
  return {bytes, 0};
}

// Tokens [begin, end) of every layer of a [layers, tokens, dims] latent input.
HostTensor tokens_of(const HostTensor& latents, int64_t begin, int64_t end) {
  const int64_t layers = latents.shape()[0], tokens = latents.shape()[1], row_bytes = latents.shape()[2] * 2;
  HostTensor out(latents.dtype(), {layers, end - begin, latents.shape()[2]});
  for (int64_t layer = 0; layer < layers; ++layer)
    std::memcpy(out.bytes() + layer * (end - begin) * row_bytes, latents.bytes() + (layer * tokens + begin) * row_bytes,
                static_cast<size_t>((end - begin) * row_bytes));
  return out;
}

// A step's rows store independently (no two rows share a slot): rows [begin, end) are a step of
// their own over the same pools and mapping, which are state a split run carries from one part to
// the next.
BatchSlice slice_batch(const MemoryPoolCase& c, const TensorMap& inputs, int64_t begin, int64_t end) {
  BatchSlice slice{c.untyped().with("tokens", str(end - begin)), {{"full_to_swa", inputs.at("full_to_swa")}}, {}};
  for (const char* name : {"out_cache_loc", "seq_lens", "stale_swa_loc"})
    slice.inputs.emplace(name, inputs.at(name).rows(begin, end));
  for (const char* name : {"kv", "compressed_kv", "index_k"}) slice.inputs.emplace(name, tokens_of(inputs.at(name), begin, end));
  for (const char* name : {"swa_out_loc", "c4_out_loc", "c128_out_loc"}) slice.output_rows.emplace(name, begin);
  return slice;
}

}  // namespace

MemoryPoolSizes memory_pool_sizes(const MemoryPoolCase& c) {
  MemoryPoolSizes s;
  static_cast<MemoryPoolParams&>(s) = c;
  const auto bad = [&](const std::string& why) { return BadInput("memory_pool: " + why + " in " + c.str()); };
  if (s.tokens < 0) throw bad("tokens must be >= 0");
  // Each size is bounded before any product of sizes is formed, so that none overflows.
  if (s.layers < 3 || s.layers > 1024) throw bad("layers must be in [3, 1024] (at least 3, so that every pool has a layer: ratios 0, 4, 128, ...)");
  if (s.first_layer < 0 || s.first_layer >= s.layers) throw bad("first_layer must be in [0, layers)");
  if (s.order < StoreOrder::ascending || s.order > StoreOrder::shuffled) throw bad("order must be 0 (ascending), 1 (descending) or 2 (shuffled)");
  if (s.per_request < 1) throw bad("per_request must be >= 1");
  if (s.history < 0) throw bad("history must be >= 0");
  if (s.swa_page < 1 || s.swa_page > 4096) throw bad("swa_page must be in [1, 4096]");
  if (s.window < 1) throw bad("window must be >= 1");
  if (s.full_pages < 1 || s.full_pages > (int64_t{1} << 20)) throw bad("full_pages must be in [1, 2^20]");
  if (s.swa_pages < 1 || s.swa_pages > (int64_t{1} << 20) || s.swa_pages * s.swa_page > (int64_t{1} << 28))
    throw bad("swa_pages must be in [1, 2^20], swa slots <= 2^28");
  if (!(s.invalid >= 0 && s.invalid <= 1)) throw bad("invalid must be in [0, 1]");
  if (s.tokens > (int64_t{1} << 18) / s.layers) throw bad("tokens * layers above 2^18 rows");
  int64_t pool_bytes = 0;
  for (PoolKind kind : {PoolKind::swa, PoolKind::c4, PoolKind::c128, PoolKind::indexer}) {
    const int64_t pages = kind == PoolKind::swa ? s.swa_pages : s.full_pages;
    pool_bytes += reference::pool_layers(kind, static_cast<int>(s.layers)) * pages * reference::pool_page_bytes(kind, s.swa_page);
  }
  if (pool_bytes > (int64_t{1} << 30)) throw bad("the pools' " + str(pool_bytes) + " bytes above 2^30 (fewer full_pages, swa_pages or layers)");
  return s;
}

std::vector<int> memory_pool_store_order(const MemoryPoolCase& c) {
  const MemoryPoolSizes s = memory_pool_sizes(c);
  std::vector<int> order;
  for (int64_t layer = s.first_layer; layer < s.layers; ++layer) order.push_back(static_cast<int>(layer));
  if (s.order == StoreOrder::descending) std::reverse(order.begin(), order.end());
  if (s.order == StoreOrder::shuffled) {
    Rng rng(c.seed() ^ 0x5eedu);
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[static_cast<size_t>(rng.integer(0, static_cast<int64_t>(i) - 1))]);
  }
  return order;
}

Component memory_pool_component() {
  Descriptor<MemoryPoolParams> d;
  d.name = "memory_pool";
  d.summary = "one step's DeepSeek-V4 KV pool writes: swa/c4/c128 locations translated once, then every layer's MODEL1 and indexer FP8 stores";
  d.verify_cases = {
      "memory_pool(tokens=1)",
      "memory_pool(tokens=6,order=1)",
      "memory_pool(tokens=6,first_layer=1,order=2)",
      "memory_pool(tokens=64,layers=5,full_pages=200,swa_pages=140,order=2)",
      "memory_pool(tokens=300,per_request=300,history=1000,full_pages=8,swa_pages=4)",
      "memory_pool(tokens=257,per_request=100,layers=3,swa_page=64,window=128,full_pages=16,swa_pages=16,invalid=0.3)",
      "memory_pool(tokens=40,per_request=4,swa_page=2,window=3,history=9,swa_pages=100,first_layer=2)",
      "memory_pool(tokens=128,per_request=128,history=0,window=1000,swa_page=128,full_pages=4,swa_pages=4,invalid=0)",
      // Past kv_pool_store's kBulkTokens (4096): its 4-step blocks, each part's last block partial.
      "memory_pool(tokens=4097,per_request=4097,history=0,full_pages=20,swa_pages=20)",
  };
  d.batch_param = "tokens";
  // Replayed as target-verify steps (4 rows a request): the c4 pool is as large as the full pool,
  // so 64 requests rather than 256 keep 256 replays of every output cheap.
  d.replay_case = "memory_pool(tokens=1,layers=3,per_request=4,history=250,swa_page=8,window=8,full_pages=66,swa_pages=130)";
  // The allocator's pool_slot0_handed_out is host code: reference/CMakeLists.txt builds it, and
  // its CPU test must fail (tests/CMakeLists.txt).
  d.mutants = {
      DSV4H_MUTANT(pool_cached_loc, "kv_pool_translate.hip kv_pool_store.hip kv_pool_gather.hip", "layer 0's SWA translation cached and reused by every later store (review finding 5)"),
      DSV4H_MUTANT(pool_minus_one_wraparound, "kv_pool_translate.hip kv_pool_store.hip kv_pool_gather.hip", "-1 indexed with Python's wraparound: the last mapping entry (spec 5.5)"),
      DSV4H_MUTANT(pool_scale_round_down, "kv_pool_translate.hip kv_pool_store.hip kv_pool_gather.hip", "the ue8m0 scale exponent rounded down: a tile's largest values exceed fp8's range"),
  };
  d.gpu_tests = "*MemoryPool*:*KvPool*:*LatencyFloor.Kv*";
  d.bench_binary = "bench_memory_pool";
  // Issue 4's goals (ci/goals.py): bandwidth at >= 32 MB moved in both slot orders (scatter:0 page
  // runs, a prefill's; scatter:1 every token shuffled, a decode's), against the faster copy of the
  // same bytes and the same bytes moved between the same slots without the format's arithmetic;
  // decode-size stores against an empty kernel; torch's index_put / gather at shuffled slots, and
  // every peer of tests/peers/memory_pool.py (torch eager, torch.compile, a Triton kernel).
  d.goals = R"json([
    {"text": "{name}: >= 85% of copy bandwidth ({mb:.0f} MB)", "measure": "copy_fraction", "bound": 0.85,
     "match": "BM_kv_(?P<op>store|gather)/tokens:(?P<tokens>[0-9]+)/scatter:(?P<scatter>[0-9]+)/manual_time", "min_bytes": 32e6,
     "floors": ["BM_copy_same_bytes_pool/tokens:{tokens}/manual_time", "BM_kv_{op}_floor/tokens:{tokens}/scatter:{scatter}/manual_time"]},
    {"text": "kv store of {tokens} tokens: <= 1.5x an empty kernel", "measure": "ratio_to_empty", "bound": 1.5,
     "benchmark": "BM_kv_store/tokens:{tokens}/scatter:1/manual_time", "empty": "BM_empty_kernel_pool/manual_time",
     "each": [[{"tokens": 1}, {"tokens": 8}, {"tokens": 64}, {"tokens": 256}]],
     "floors": ["BM_dependent_loads_pool/depth:1/manual_time", "BM_kv_store_floor/tokens:{tokens}/scatter:1/manual_time"]},
    {"text": "kv {op} of {tokens} tokens: >= 2x faster than torch ({peer:.1f} us)", "measure": "speedup_over_peer", "bound": 2,
     "peers": "peers.memory_pool", "where": {"scatter": 1}, "against": "eager_us",
     "benchmark": "BM_kv_{op}/tokens:{tokens}/scatter:1/manual_time"},
    {"text": "kv {op} of {tokens} tokens scatter={scatter}: faster than every peer (best: {best_peer}, {best_peer_us:.1f} us)",
     "measure": "faster_than_peers", "bound": 1.0, "peers": "peers.memory_pool",
     "benchmark": "BM_kv_{op}/tokens:{tokens}/scatter:{scatter}/manual_time"}
  ])json";
  d.make_inputs = make_inputs;
  d.validate_inputs = validate_inputs;
  d.make_outputs = make_outputs;
  d.reference = run_reference;
  d.pad_batch = pad_batch;
  d.work = work;
  d.unchecked = sink_unchecked;
  d.slice_batch = slice_batch;
  d.state_outputs = {"swa_pool", "c4_pool", "c128_pool", "indexer_pool"};
  d.relation_cases = {
      "split(at=100):memory_pool(tokens=300,per_request=300,history=1000,full_pages=8,swa_pages=4)",
      "split(every=1):memory_pool(tokens=24,per_request=4,layers=5,order=2)",
      "batch_invariance(chunks=3):memory_pool(tokens=64,per_request=8,layers=5)",
  };
#if DSV4H_GPU_LAYER
  d.gpu = [](const MemoryPoolCase& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream) {
    launch_memory_pool_case(c.untyped(), inputs, outputs, stream);
  };
#endif
  return erase(std::move(d));
}

}  // namespace dsv4h
