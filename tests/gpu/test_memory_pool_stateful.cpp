// The memory pool as a stateful system (RapidCheck state machine): random sequences of add request,
// extend by n tokens, decode one token, a batched forward step of several requests, free request
// and rebuild the mapping (relocate a request's SWA pages), run on the host allocator and the GPU
// pool, with every step's layers storing in a random order. After every command, against a plain
// model (request lengths and what each token stored): no slot owned twice, slot 0 never handed
// out, exactly the tokens older than the window evicted, and every live entry (SWA latents in the
// window, c4 / c128 latents and indexer keys of completed blocks) reads back from the GPU bit for
// bit as the CPU pack of what was stored. Tokens whose SWA pages were relocated lose their SWA
// data (a rebuilt mapping moves no bytes) and are not read back. Beyond the live entries, every
// byte of every pool but the sink equals a CPU pool that took the reference's stores of the same
// steps: a store to a freed, evicted or foreign slot shows there though no live entry changed.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/state.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

#include "gpu_env.h"
#include "harness/compare.h"
#include "harness/component.h"
#include "harness/poison.h"
#include "harness/random.h"
#include "memory_pool_device.h"
#include "reference/kv_cache_indexer.h"
#include "reference/kv_cache_model1.h"
#include "reference/kv_pool.h"
#include "reference/kv_pool_allocator.h"

namespace dsv4h {
namespace {

using reference::PoolKind;
using Token = std::pair<int64_t, int64_t>;  // request, position

constexpr int kLayers = 4;
constexpr int64_t kMaxRequests = 4, kMaxLength = 512, kWindow = 32, kSwaPage = 16;
// Enough pages that the bounded sequences never exhaust a pool: 4 requests of 2 full pages, and of
// ceil(32 / 16) + 1 SWA pages, plus page 0.
const std::string kPoolCase = "memory_pool(layers=4,swa_page=16,window=32,full_pages=20,swa_pages=16)";

// A token's rows: its latent (which 0), compressed latent (1) and key (2) for `layer`, from its
// seed; kept once made, since every check reads every live token back.
std::map<std::tuple<uint64_t, int, int>, std::vector<uint16_t>> made_rows;

const std::vector<uint16_t>& token_row(uint64_t seed, int layer, int which, int dims) {
  std::vector<uint16_t>& row = made_rows[{seed, layer, which}];
  if (!row.empty()) return row;
  Rng rng(seed * 31 + static_cast<uint64_t>(layer) * 7 + static_cast<uint64_t>(which));
  const double scale = std::ldexp(1.0, static_cast<int>(rng.integer(-20, 20)));
  row.resize(static_cast<size_t>(dims));
  for (uint16_t& v : row) v = float_to_bf16(static_cast<float>(rng.normal() * scale));
  return row;
}

struct PoolModel {
  int64_t next_id = 0;
  std::map<int64_t, int64_t> lengths;
  std::map<Token, uint64_t> stored;  // the seed of what each token stored
  std::set<Token> swa_lost;          // relocated before being read: SWA data not carried over
};

struct PoolSut {
  Case c = parse_case(kPoolCase);
  reference::PoolAllocator alloc{{20, 16, kSwaPage, kWindow}};
  DeviceTensorMap pools;
  DeviceBuffer translation_cache{sizeof(int32_t) * kMaxLength};
  // The CPU pools: the reference's stores of every step so far. Both start as the same poison, so
  // that their comparison is one of bits (a packed word may by chance equal a poison).
  TensorMap expected;
  PoolSut() {
    made_rows.clear();
    expected = registry().get("memory_pool").make_outputs(c);
    fill_poison(expected, Poison::a);
    pools = DeviceTensorMap::upload(expected);
    DSV4H_HIP_CHECK(hipMemcpy(translation_cache.data(), std::vector<int32_t>(kMaxLength, 0).data(),
                              translation_cache.bytes(), hipMemcpyHostToDevice));
  }
};

uint64_t token_seed(uint64_t command_seed, Token t) {
  return command_seed * 1000003u + static_cast<uint64_t>(t.first) * 4099u + static_cast<uint64_t>(t.second);
}

// One forward step on the GPU: the tokens' rows, translated once, stored by every layer in `order`.
void forward_step(PoolSut& sut, const std::vector<Token>& tokens, const std::vector<int32_t>& locs,
                  const std::vector<uint64_t>& seeds, const std::vector<int>& order) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  const Case c = sut.c.with("tokens", std::to_string(n));
  TensorMap in;
  in["full_to_swa"] = HostTensor(DType::i32, {static_cast<int64_t>(sut.alloc.full_to_swa().size())});
  std::memcpy(in["full_to_swa"].bytes(), sut.alloc.full_to_swa().data(), in["full_to_swa"].nbytes());
  in["out_cache_loc"] = HostTensor(DType::i32, {n});
  in["seq_lens"] = HostTensor(DType::i32, {n});
  in["stale_swa_loc"] = HostTensor(DType::i32, {n});
  in["kv"] = HostTensor(DType::bf16, {kLayers, n, 512});
  in["compressed_kv"] = HostTensor(DType::bf16, {kLayers, n, 512});
  in["index_k"] = HostTensor(DType::bf16, {kLayers, n, 128});
  for (int64_t i = 0; i < n; ++i) {
    in["out_cache_loc"].data<int32_t>()[i] = locs[static_cast<size_t>(i)];
    in["seq_lens"].data<int32_t>()[i] = static_cast<int32_t>(tokens[static_cast<size_t>(i)].second + 1);
    in["stale_swa_loc"].data<int32_t>()[i] = 0;
    for (int layer = 0; layer < kLayers; ++layer) {
      const uint64_t seed = seeds[static_cast<size_t>(i)];
      std::memcpy(in["kv"].data<uint16_t>() + (layer * n + i) * 512, token_row(seed, layer, 0, 512).data(), 1024);
      std::memcpy(in["compressed_kv"].data<uint16_t>() + (layer * n + i) * 512, token_row(seed, layer, 1, 512).data(), 1024);
      std::memcpy(in["index_k"].data<uint16_t>() + (layer * n + i) * 128, token_row(seed, layer, 2, 128).data(), 256);
    }
  }
  DeviceTensorMap inputs = DeviceTensorMap::upload(in);
  TensorMap meta_host;
  for (const char* name : {"swa_out_loc", "c4_out_loc", "c128_out_loc"}) meta_host[name] = HostTensor(DType::i32, {n});
  DeviceTensorMap meta = DeviceTensorMap::upload(meta_host);
  const KvPoolSet pools = memory_pool_device_pools(c, sut.pools, static_cast<int32_t*>(sut.translation_cache.data()));
  const KvStepLocations step = testing::pool_step(c, inputs, meta, 0, n);
  launch_kv_translate(step, nullptr);
  for (int layer : order) launch_kv_store_layer(pools, step, testing::pool_layer(c, inputs, layer, 0), nullptr);
  DSV4H_HIP_CHECK(hipStreamSynchronize(nullptr));
  for (const char* name : {"swa_out_loc", "c4_out_loc", "c128_out_loc"}) sut.expected[name] = HostTensor(DType::i32, {n});
  registry().get("memory_pool").reference(c, in, sut.expected);
}

std::string last_mismatch;  // the last failed read-back, for the gtest failure message

// Gathers `slots` of one pool layer and compares with the CPU pack-then-unpack of `rows`.
bool read_back(PoolSut& sut, PoolKind kind, int local_layer, const std::vector<int32_t>& slots,
               const std::vector<std::vector<uint16_t>>& rows, const std::string& what) {
  if (slots.empty()) return true;
  const int64_t n = static_cast<int64_t>(slots.size());
  const bool keys = kind == PoolKind::indexer;
  const int64_t per_page = reference::pool_tokens_per_page(kind, kSwaPage);
  HostTensor want(keys ? DType::f32 : DType::bf16, {n, keys ? 128 : 512});
  std::vector<uint8_t> scratch(static_cast<size_t>(reference::pool_page_bytes(kind, kSwaPage)));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t entry = slots[static_cast<size_t>(i)] % per_page;
    if (keys) {
      reference::indexer_pack_entry(rows[static_cast<size_t>(i)].data(), per_page, entry, scratch.data());
      reference::indexer_unpack_entry(scratch.data(), per_page, entry, want.data<float>() + i * 128);
    } else {
      reference::model1_pack_token(rows[static_cast<size_t>(i)].data(), per_page, entry, scratch.data());
      reference::model1_unpack_token(scratch.data(), per_page, entry, want.data<uint16_t>() + i * 512);
    }
  }
  HostTensor slot_tensor(DType::i32, {n});
  std::memcpy(slot_tensor.bytes(), slots.data(), static_cast<size_t>(n) * 4);
  DeviceTensor device_slots = DeviceTensor::like(slot_tensor), got = DeviceTensor::like(want);
  device_slots.upload(slot_tensor);
  HostTensor poisoned = want;
  fill_poison(poisoned, Poison::b);
  got.upload(poisoned);
  const Case c = sut.c;
  const KvPoolSet pools = memory_pool_device_pools(c, sut.pools, nullptr);
  const KvPoolBuffer& buffer = kind == PoolKind::swa ? pools.swa : kind == PoolKind::c4 ? pools.c4
                               : kind == PoolKind::c128 ? pools.c128 : pools.indexer;
  const int32_t* s = static_cast<const int32_t*>(device_slots.buffer.data());
  if (keys) launch_kv_gather_indexer(buffer, local_layer, s, n, static_cast<float*>(got.buffer.data()), nullptr);
  else launch_kv_gather_model1(buffer, local_layer, s, n, static_cast<uint16_t*>(got.buffer.data()), nullptr);
  DSV4H_HIP_CHECK(hipStreamSynchronize(nullptr));
  const OutputComparison cmp = compare_output(what, want, Poison::a, got.download(), Poison::b, OutputCheck{});
  if (!cmp.passed()) last_mismatch = cmp.summary();
  return cmp.passed();
}

// Every byte of every pool, the sink's aside, against the CPU pools.
void check_whole_pools(PoolSut& sut) {
  const Component& component = registry().get("memory_pool");
  TensorMap got = sut.pools.download(), want = sut.expected;
  mask_unchecked(component, sut.c, got, Poison::a);
  mask_unchecked(component, sut.c, want, Poison::a);
  for (PoolKind kind : reference::kPoolKinds) {
    const std::string name = reference::pool_kind_name(kind) + "_pool";
    const OutputComparison cmp = compare_output(name, want.at(name), Poison::a, got.at(name), Poison::a, OutputCheck{});
    if (!cmp.passed()) {
      last_mismatch = "beyond the live entries: " + cmp.summary();
      RC_FAIL(last_mismatch);
    }
  }
}

// Every invariant and every live entry, after a command, against the model `m`.
void check_pool(const PoolModel& m, PoolSut& sut) {
  std::set<int32_t> full_slots, swa_slots;
  std::vector<int32_t> slots[4][kLayers];
  std::vector<std::vector<uint16_t>> rows[4][kLayers];
  for (const auto& [r, length] : m.lengths) {
    RC_ASSERT(sut.alloc.length(r) == length);
    for (int64_t pos = 0; pos < length; ++pos) {
      const int32_t full = sut.alloc.full_loc(r, pos), swa = sut.alloc.swa_loc(r, pos);
      RC_ASSERT(full >= reference::kFullPageTokens);  // page 0 (slot 0, the sink) never handed out
      RC_ASSERT(full_slots.insert(full).second);      // no full slot owned twice
      const bool in_window = pos >= length - kWindow;
      RC_ASSERT(in_window == (swa != 0));  // evicted: exactly the tokens older than the window
      if (in_window) {
        RC_ASSERT(swa >= kSwaPage);
        RC_ASSERT(swa_slots.insert(swa).second);
      }
      const uint64_t seed = m.stored.at({r, pos});
      for (int layer = 0; layer < kLayers; ++layer) {
        const int ratio = reference::layer_compress_ratio(layer);
        if (in_window && m.swa_lost.count({r, pos}) == 0) {
          slots[0][layer].push_back(swa);
          rows[0][layer].push_back(token_row(seed, layer, 0, 512));
        }
        if (ratio > 0 && (pos + 1) % ratio == 0) {
          const int k = ratio == 4 ? 1 : 2;
          const int local = reference::pool_local_layer(ratio == 4 ? PoolKind::c4 : PoolKind::c128, layer);
          slots[k][local].push_back(reference::compressed_out_loc(full, static_cast<int32_t>(pos + 1), ratio));
          rows[k][local].push_back(token_row(seed, layer, 1, 512));
          if (ratio == 4) {
            slots[3][local].push_back(slots[k][local].back());
            rows[3][local].push_back(token_row(seed, layer, 2, 128));
          }
        }
      }
    }
  }
  const PoolKind kinds[4] = {PoolKind::swa, PoolKind::c4, PoolKind::c128, PoolKind::indexer};
  for (int k = 0; k < 4; ++k)
    for (int layer = 0; layer < kLayers; ++layer)
      if (!read_back(sut, kinds[k], layer, slots[k][layer], rows[k][layer],
                     reference::pool_kind_name(kinds[k]) + " layer " + std::to_string(layer)))
        RC_FAIL(last_mismatch);
  check_whole_pools(sut);
}

std::vector<int> layer_order(int permutation) {
  std::vector<int> order(kLayers);
  for (int i = 0; i < kLayers; ++i) order[static_cast<size_t>(i)] = i;
  for (int i = 0; i < permutation; ++i) std::next_permutation(order.begin(), order.end());
  return order;
}

using PoolCommand = rc::state::Command<PoolModel, PoolSut>;

struct AddRequest : PoolCommand {
  void checkPreconditions(const PoolModel& m) const override { RC_PRE(static_cast<int64_t>(m.lengths.size()) < kMaxRequests); }
  void apply(PoolModel& m) const override { m.lengths[m.next_id++] = 0; }
  void run(const PoolModel& m, PoolSut& sut) const override {
    RC_ASSERT(sut.alloc.add_request() == m.next_id);
    PoolModel next = m;
    apply(next);
    check_pool(next, sut);
  }
  void show(std::ostream& os) const override { os << "add request"; }
};

// Some requests each add tokens in one forward step: n tokens for one request (extend, decode),
// or one token each for several (a decode batch).
struct Step : PoolCommand {
  std::vector<std::pair<int64_t, int64_t>> adds;  // request, tokens
  int permutation = *rc::gen::inRange(0, 24);
  uint64_t seed = *rc::gen::inRange<uint64_t>(1, 1u << 30);
  std::string name;
  Step(const PoolModel& m, int kind) {
    std::vector<int64_t> live;
    for (const auto& [r, length] : m.lengths) live.push_back(r);
    RC_PRE(!live.empty());
    if (kind == 2) {
      name = "decode batch";
      for (int64_t r : live) if (*rc::gen::arbitrary<bool>()) adds.push_back({r, 1});
      RC_PRE(!adds.empty());
    } else {
      name = kind == 0 ? "decode" : "extend";
      adds.push_back({*rc::gen::elementOf(live), kind == 0 ? 1 : *rc::gen::inRange<int64_t>(2, 300)});
    }
  }
  void checkPreconditions(const PoolModel& m) const override {
    for (const auto& [r, n] : adds) RC_PRE(m.lengths.count(r) == 1 && m.lengths.at(r) + n <= kMaxLength);
  }
  void apply(PoolModel& m) const override {
    for (const auto& [r, n] : adds) {
      for (int64_t pos = m.lengths[r]; pos < m.lengths[r] + n; ++pos) m.stored[{r, pos}] = token_seed(seed, {r, pos});
      m.lengths[r] += n;
    }
  }
  void run(const PoolModel& m, PoolSut& sut) const override {
    std::vector<Token> tokens;
    std::vector<int32_t> locs;
    std::vector<uint64_t> seeds;
    for (const auto& [r, n] : adds) {
      const std::vector<int32_t> got = sut.alloc.extend(r, n);
      for (int64_t k = 0; k < n; ++k) {
        tokens.push_back({r, m.lengths.at(r) + k});
        locs.push_back(got[static_cast<size_t>(k)]);
        seeds.push_back(token_seed(seed, tokens.back()));
      }
    }
    forward_step(sut, tokens, locs, seeds, layer_order(permutation));
    PoolModel next = m;
    apply(next);
    check_pool(next, sut);
  }
  void show(std::ostream& os) const override {
    os << name << " (layers in order";
    for (int l : layer_order(permutation)) os << " " << l;
    os << ", seed " << seed << "):";
    for (const auto& [r, n] : adds) os << " request " << r << " +" << n;
  }
};
struct Decode : Step { explicit Decode(const PoolModel& m) : Step(m, 0) {} };
struct Extend : Step { explicit Extend(const PoolModel& m) : Step(m, 1) {} };
struct DecodeBatch : Step { explicit DecodeBatch(const PoolModel& m) : Step(m, 2) {} };

struct OnRequest : PoolCommand {
  int64_t request;
  explicit OnRequest(const PoolModel& m) {
    std::vector<int64_t> live;
    for (const auto& [r, length] : m.lengths) live.push_back(r);
    RC_PRE(!live.empty());
    request = *rc::gen::elementOf(live);
  }
  void checkPreconditions(const PoolModel& m) const override { RC_PRE(m.lengths.count(request) == 1); }
};

struct FreeRequest : OnRequest {
  using OnRequest::OnRequest;
  void apply(PoolModel& m) const override {
    for (int64_t pos = 0; pos < m.lengths.at(request); ++pos) {
      m.stored.erase({request, pos});
      m.swa_lost.erase({request, pos});
    }
    m.lengths.erase(request);
  }
  void run(const PoolModel& m, PoolSut& sut) const override {
    sut.alloc.free_request(request);
    PoolModel next = m;
    apply(next);
    check_pool(next, sut);
  }
  void show(std::ostream& os) const override { os << "free request " << request; }
};

struct RebuildMapping : OnRequest {
  using OnRequest::OnRequest;
  void apply(PoolModel& m) const override {
    const int64_t length = m.lengths.at(request);
    for (int64_t pos = std::max<int64_t>(0, length - kWindow); pos < length; ++pos) m.swa_lost.insert({request, pos});
  }
  void run(const PoolModel& m, PoolSut& sut) const override {
    sut.alloc.relocate_swa(request);
    PoolModel next = m;
    apply(next);
    check_pool(next, sut);
  }
  void show(std::ostream& os) const override { os << "rebuild the swa mapping of request " << request; }
};

TEST(MemoryPoolGpuStateful, AllocatorAndGpuPoolAgreeWithThePlainModel) {
  DSV4H_GPU_OR_SKIP(gpu);
  const bool ok = rc::check("memory pool state machine", [] {
    PoolSut sut;
    rc::state::check(PoolModel{}, sut,
                     rc::state::gen::execOneOfWithArgs<AddRequest, Decode, Extend, DecodeBatch, FreeRequest, RebuildMapping>());
  });
  EXPECT_TRUE(ok) << "see the command sequence and the RC_PARAMS line above; last failed read-back: " << last_mismatch;
}

}  // namespace
}  // namespace dsv4h
