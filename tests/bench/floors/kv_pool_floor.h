// Floors for the pool's MODEL1 store and gather at given slots: the same bytes between the same
// places as launch_kv_store_layer and launch_kv_gather_model1, moved without any arithmetic. A
// benchmark times them beside the real kernels, so that a bandwidth goal at shuffled slots is read
// against what the access pattern itself allows (a plain device copy of the same bytes reads and
// writes contiguously, which shuffled 584-byte entries cannot).
#pragma once

#include <cstdint>

#include "kernels/kv_pool.h"

namespace dsv4h {

// Row t (1024 bytes of `rows`) is read whole; its bytes [0, 576) go to the entry of slot slots[t]
// in layer 0 of `pool` and its bytes [576, 584) to that slot's scale bytes. Slots outside
// [1, pool.slots()) write nothing.
void launch_kv_scatter_floor(const KvPoolBuffer& pool, const uint16_t* rows, const int32_t* slots, int64_t n,
                             hipStream_t stream);

// The reverse: slot slots[t]'s 576 entry bytes and 8 scale bytes become bytes [0, 584) of row t of
// `out` (1024 bytes a row), the rest of the row zeros. Slots outside the pool give a zero row.
void launch_kv_gather_floor(const KvPoolBuffer& pool, const int32_t* slots, int64_t n, uint16_t* out,
                            hipStream_t stream);

}  // namespace dsv4h
