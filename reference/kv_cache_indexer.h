// CPU reference of the DeepSeek-V4 indexer K cache entry (spec 4.2), the page format of the C4
// indexer pool (issue 4).
//
// An entry is a 128-dim bf16 key stored as 128 fp8 e4m3 values with one power-of-two fp32 scale.
// A page of P entries (P = 64 in the pool) has two sections and no padding, 132 bytes per entry:
//   values: entry t at t * 128:          128 fp8 codes
//   scales: entry t at P * 128 + t * 4:  the scale 2^e as an fp32 (little endian)
//
// Scale rule: 2^ceil(log2(max(amax, 1e-4) / 448)). Taken from vLLM's indexer K store
// (csrc/cache_kernels.cu, indexer_k_quant_and_cache_kernel, its use_ue8m0 path: the 1e-4 floor is
// on amax, before the division, unlike MODEL1's floor on amax / 448), which SGLang's NSA indexer
// store follows. [INF] That SGLang's DeepSeek-V4 fused indexer store (set_index_fused) uses this
// same rule was not read in its source; the harness compares like with like either way.
#pragma once

#include <cstdint>

namespace dsv4h::reference {

constexpr int kIndexerDims = 128;
constexpr int kIndexerDataBytes = 128;  // per entry in the values section
constexpr int kIndexerEntryBytes = 132;

constexpr int64_t indexer_page_bytes(int64_t entries_per_page) { return entries_per_page * kIndexerEntryBytes; }

// The e of the scale 2^e for a key whose largest magnitude is `amax`: the smallest e with
// max(amax, 1e-4) / 448 <= 2^e, computed exactly (from -22 for the floor up to 120).
int indexer_scale_exponent(float amax);

// Writes entry t's 132 bytes (and nothing else) into `page`; the key is 128 bf16 bit patterns.
void indexer_pack_entry(const uint16_t* key_bf16, int64_t entries_per_page, int64_t t, uint8_t* page);

// Reads entry t back as fp32 values fp8 * 2^e (exact, except that 2^128 and above overflow to inf
// where e = 120, as a kernel's fp32 dequantisation does).
void indexer_unpack_entry(const uint8_t* page, int64_t entries_per_page, int64_t t, float* key);

}  // namespace dsv4h::reference
