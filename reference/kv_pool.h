// The DeepSeek-V4 KV memory pool's layout and location arithmetic (spec 5.1, 5.2, 5.4), as plain
// functions that the reference, the tests and the GPU bindings share as the definition.
//
// Four pools, each a buffer per layer of its bucket, paged, slot s at page s / P, entry s % P:
//   swa      MODEL1 584-B entries, P = swa_page (256 by default), every layer
//   c4       MODEL1 entries, P = 64 (a 256-token full page compresses to 64), ratio-4 layers
//   c128     MODEL1 entries, P = 2, ratio-128 layers
//   indexer  132-B indexer entries, P = 64, ratio-4 layers
// Slot 0 (page 0) of every pool is the write sink and never holds live data. The stores here treat
// a location of 0 (and -1) as "write nothing": no reader looks at slot 0, and writing nothing keeps
// the pool bytes deterministic when many rows of different data target the sink. A kernel need not
// do the same: the memory_pool component leaves slot 0 unchecked (Component::unchecked).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dsv4h::reference {

enum class PoolKind { swa, c4, c128, indexer };
constexpr PoolKind kPoolKinds[] = {PoolKind::swa, PoolKind::c4, PoolKind::c128, PoolKind::indexer};
std::string pool_kind_name(PoolKind kind);

constexpr int64_t kFullPageTokens = 256;  // the full-cache page, hard-coded 256 upstream

// The compress ratio of layer L in the tiny configuration's pattern (spec 1.3): [0, 4, 128, 4, 128,
// ...]: layer 0 SWA only, odd layers 4, even layers >= 2 128.
int layer_compress_ratio(int layer);
// The layer's index inside its pool's bucket (its buffer in that pool), or -1 when the layer has no
// buffer there: every layer has one in swa; ratio-4 layers in c4 and indexer; ratio-128 in c128.
int pool_local_layer(PoolKind kind, int layer);
int pool_layers(PoolKind kind, int layers);  // how many layers of `layers` have a buffer there

int64_t pool_tokens_per_page(PoolKind kind, int64_t swa_page);
int64_t pool_entry_bytes(PoolKind kind);
// Of an entry's bytes, those in its page's first section (entry t at t * these); the rest lie in the
// second section (the scales), which starts after the page's P entries of the first.
int64_t pool_entry_data_bytes(PoolKind kind);
int64_t pool_page_bytes(PoolKind kind, int64_t swa_page);  // multiples of 4 bytes in every pool

// swa_out_loc = full_to_swa[out_cache_loc]; -1 stays -1 (decided before indexing, never by
// wraparound). BadInput naming the row and value for any other location outside the mapping.
std::vector<int32_t> translate_swa(const std::vector<int32_t>& full_to_swa, const std::vector<int32_t>& out_cache_loc);

// The compressed pool's out location of a token at `full_loc` whose sequence length after it is
// `seq_len`: full_loc / ratio when the token completes a block (seq_len % ratio == 0), else 0 (the
// sink); 0 for an invalid token (full_loc -1).
int32_t compressed_out_loc(int32_t full_loc, int32_t seq_len, int ratio);

}  // namespace dsv4h::reference
