// The pool's pack-and-store kernel against the CPU pack, exhaustively: every fp8 code at every
// scale exponent that can occur, for MODEL1 latents (e from -13, the 1e-4 floor, to 120, the
// largest bf16 amax; one token per exponent holds all 254 finite codes in its 7 tiles) and for
// indexer keys (e from -22 to 120, three entries per exponent), each tile or key fixed at its
// exponent by an element at 448 * 2^e. The whole pool is compared word for word, so a byte
// written anywhere else fails too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "gpu_env.h"
#include "harness/compare.h"
#include "harness/gpu/device_tensor.h"
#include "harness/poison.h"
#include "kernels/kv_pool.h"
#include "reference/kv_cache_indexer.h"
#include "reference/kv_cache_model1.h"

namespace dsv4h {
namespace {

constexpr uint16_t kBf16Max = 0x7f7f;

// 448 * 2^e, or the largest bf16 where that overflows (which also has exponent 120).
uint16_t amax_bits(int e) { return e >= 120 ? kBf16Max : float_to_bf16(std::ldexp(448.f, e)); }

// fp8 code `code` scaled by 2^e as a bf16, or 0 where no finite bf16 holds it (NaN codes, and
// codes above 255 at e = 120).
uint16_t code_bits(int code, int e) {
  if ((code & 0x7f) == 0x7f) return 0;
  const double v = std::ldexp(static_cast<double>(fp8_e4m3_to_float(static_cast<uint8_t>(code))), e);
  return std::fabs(v) > bf16_to_float(kBf16Max) ? 0 : float_to_bf16(static_cast<float>(v));
}

// Rows of `dims` values: row r is at exponent first_e + r / rows_per_e; its groups of `group`
// values start with the amax and then carry the next codes in order.
HostTensor code_rows(int first_e, int last_e, int rows_per_e, int dims, int group) {
  const int64_t rows = int64_t{last_e - first_e + 1} * rows_per_e;
  HostTensor t(DType::bf16, {rows, dims});
  uint16_t* x = t.data<uint16_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const int e = first_e + static_cast<int>(r / rows_per_e);
    int code = static_cast<int>(r % rows_per_e) * (dims / group) * (group - 1);
    for (int d = 0; d < dims; ++d) {
      if (d >= 448 && dims == 512) x[r * dims + d] = static_cast<uint16_t>(0x3c00 + d + r);  // rope bits
      else if (d % group == 0) x[r * dims + d] = amax_bits(e);
      else x[r * dims + d] = code < 256 ? code_bits(code++, e) : 0;
    }
  }
  return t;
}

HostTensor poisoned_pool(int64_t pages, int64_t page_bytes) {
  HostTensor t(DType::i32, {pages * page_bytes / 4});
  fill_poison(t, Poison::a);
  return t;
}

TEST(MemoryPoolGpuFormats, EveryFp8CodeAtEveryScaleExponentPacksAsOnTheCpu) {
  DSV4H_GPU_OR_SKIP(gpu);
  const HostTensor latents = code_rows(-13, 120, 1, 512, 64);  // 134 tokens, 7 tiles x 63 codes each
  const HostTensor keys = code_rows(-22, 120, 3, 128, 128);    // 429 keys, 127 codes each
  const int64_t n_latents = latents.shape()[0], n_keys = keys.shape()[0];
  // The latents go to swa slots 256.. (page 1 on, pages of 256); the keys to c4 / indexer slots
  // 64.. (pages of 64), with the latents again (cycled) as the c4 entries.
  HostTensor swa_slots(DType::i32, {n_keys}), c4_slots(DType::i32, {n_keys}), compressed(DType::bf16, {n_keys, 512});
  for (int64_t i = 0; i < n_keys; ++i) {
    swa_slots.data<int32_t>()[i] = i < n_latents ? static_cast<int32_t>(256 + i) : 0;
    c4_slots.data<int32_t>()[i] = static_cast<int32_t>(64 + i);
    std::memcpy(compressed.data<uint16_t>() + i * 512, latents.data<uint16_t>() + (i % n_latents) * 512, 1024);
  }
  HostTensor rows(DType::bf16, {n_keys, 512});  // the swa rows: latents, then zeros (slot 0: not stored)
  std::memcpy(rows.bytes(), latents.bytes(), latents.nbytes());

  const int64_t swa_pages = 2, c4_pages = 1 + (n_keys + 63) / 64;
  const int64_t swa_page_bytes = reference::model1_page_bytes(256), c4_page_bytes = reference::model1_page_bytes(64);
  const int64_t idx_page_bytes = reference::indexer_page_bytes(64);
  TensorMap expected = {{"swa", poisoned_pool(swa_pages, swa_page_bytes)},
                        {"c4", poisoned_pool(c4_pages, c4_page_bytes)},
                        {"indexer", poisoned_pool(c4_pages, idx_page_bytes)}};
  for (int64_t i = 0; i < n_keys; ++i) {
    if (i < n_latents)
      reference::model1_pack_token(latents.data<uint16_t>() + i * 512, 256, (256 + i) % 256,
                                   expected["swa"].bytes() + (256 + i) / 256 * swa_page_bytes);
    reference::model1_pack_token(compressed.data<uint16_t>() + i * 512, 64, (64 + i) % 64,
                                 expected["c4"].bytes() + (64 + i) / 64 * c4_page_bytes);
    reference::indexer_pack_entry(keys.data<uint16_t>() + i * 128, 64, (64 + i) % 64,
                                  expected["indexer"].bytes() + (64 + i) / 64 * idx_page_bytes);
  }

  HostTensor stale(DType::i32, {n_keys});  // only the pool_cached_loc mutant reads it: no slots
  std::memset(stale.bytes(), 0, stale.nbytes());
  TensorMap host_inputs = {{"rows", rows}, {"compressed", compressed}, {"keys", keys},
                           {"swa_slots", swa_slots}, {"c4_slots", c4_slots}, {"stale", stale}};
  DeviceTensorMap inputs = DeviceTensorMap::upload(host_inputs);
  TensorMap poisoned = {{"swa", poisoned_pool(swa_pages, swa_page_bytes)},
                        {"c4", poisoned_pool(c4_pages, c4_page_bytes)},
                        {"indexer", poisoned_pool(c4_pages, idx_page_bytes)}};
  DeviceTensorMap pools = DeviceTensorMap::upload(poisoned);
  KvPoolSet set;
  set.swa = {pools.data<uint8_t>("swa"), 1, swa_pages, 256, swa_page_bytes};
  set.c4 = {pools.data<uint8_t>("c4"), 1, c4_pages, 64, c4_page_bytes};
  set.indexer = {pools.data<uint8_t>("indexer"), 1, c4_pages, 64, idx_page_bytes};
  set.translation_cache = inputs.data<int32_t>("stale");
  KvStepLocations step;
  step.tokens = n_keys;
  step.swa_out_loc = inputs.data<int32_t>("swa_slots");
  step.c4_out_loc = inputs.data<int32_t>("c4_slots");
  KvLayerStore layer;
  layer.layer_id = 1;
  layer.ratio = 4;
  layer.kv = inputs.data<const uint16_t>("rows");
  layer.compressed_kv = inputs.data<const uint16_t>("compressed");
  layer.index_k = inputs.data<const uint16_t>("keys");
  launch_kv_store_layer(set, step, layer, nullptr);
  DSV4H_HIP_CHECK(hipStreamSynchronize(nullptr));
  const TensorMap got = pools.download();
  for (const auto& [name, want] : expected) {
    const OutputComparison cmp = compare_output(name + " pool", want, Poison::a, got.at(name), Poison::a, OutputCheck{});
    EXPECT_TRUE(cmp.passed()) << cmp.summary();
  }
}

}  // namespace
}  // namespace dsv4h
