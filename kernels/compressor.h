// Launch wrapper of DeepSeek-V4's KV compressor step (spec 3.2, 4.3, 9.1; kernels/compressor.hip):
// a batch of requests, each processing extend_len tokens from position start (prefill, a chunk or
// one decode token) with the state its earlier steps left in its ring.
#pragma once

#include <cstdint>

#include "portability.h"

namespace dsv4h {

struct CompressorArgs {
  const float* kv;           // [batch * tokens, coff * dims]: request b's token i at row b * tokens + i
  const float* score;        // [batch * tokens, coff * dims], without ape
  const float* ape;          // [ratio, coff * dims]
  const float* norm_weight;  // [dims]
  const float* ring;         // [(batch + 1) * R, 2 * coff * dims]: the state before the step (read only)
  const int32_t* start;      // [batch] positions processed before the step
  const int32_t* extend_len; // [batch] this step's tokens (0: a padding request, nothing read or written)
  const int32_t* ring_index; // [batch] the request's ring: rows ring_index * R .. + R - 1
  const int32_t* out_loc;    // [batch * tokens] the pool slot of the entry a token completes
  uint8_t* pool;             // pages of MODEL1 (dims 512: 64 entries for ratio 4, 2 for 128) or indexer entries (64)
  float* ring_out;           // [(batch + 1) * R, 2 * coff * dims]: the rows of the step's last min(extend_len, R) tokens
  int64_t ratio = 4, dims = 512, batch = 0, tokens = 0;
  int64_t pool_slots = 0;    // the entries `pool` holds: an out_loc outside [0, pool_slots) writes nothing
};

// The pages the kernel packs entries into: MODEL1 (dims 512) 64 entries a page for ratio 4 and 2
// for 128, each page padded to a multiple of 576 bytes; indexer keys (dims 128) 64 entries of 132 bytes.
struct CompressorPoolPages {
  int64_t entries, bytes;
};
CompressorPoolPages compressor_pool_pages(int64_t ratio, int64_t dims);

// Throws std::invalid_argument (naming the field) on sizes the kernels do not take or pointers not
// aligned for 16-byte accesses; enqueues one kernel on `stream` (the entries and the ring rows; for
// ratio 128 on NVIDIA a cluster launch), no host synchronisation.
void launch_compressor(const CompressorArgs& args, hipStream_t stream);

}  // namespace dsv4h
