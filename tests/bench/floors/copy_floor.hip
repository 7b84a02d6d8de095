#include "copy_floor.h"

#include <cstdint>
#include <stdexcept>
#include <string>

namespace dsv4h {
namespace {

constexpr int kThreads = 256;
constexpr int kUnitsPerThread = 4;  // 16-byte units: a block moves 16 KB, every load issued before a store
constexpr int64_t kUnitsPerBlock = int64_t{kThreads} * kUnitsPerThread;

// Thread t of block b moves units b * kUnitsPerBlock + t + i * kThreads (i < kUnitsPerThread): each
// of its loads is one warp-wide coalesced 512-byte access. The last `tail` bytes (bytes % 16) are
// moved by the first threads of block 0.
__global__ void __launch_bounds__(kThreads)
    copy_floor(uint4* dst, const uint4* src, int64_t units, uint8_t* dst_tail, const uint8_t* src_tail, int tail) {
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kUnitsPerBlock + threadIdx.x;
  uint4 v[kUnitsPerThread];
#pragma unroll
  for (int i = 0; i < kUnitsPerThread; ++i)
    if (first + i * kThreads < units) v[i] = load_read_only(src + first + i * kThreads);
#pragma unroll
  for (int i = 0; i < kUnitsPerThread; ++i)
    if (first + i * kThreads < units) dst[first + i * kThreads] = v[i];
  if (blockIdx.x == 0 && static_cast<int>(threadIdx.x) < tail) dst_tail[threadIdx.x] = src_tail[threadIdx.x];
}

}  // namespace

void launch_copy_floor(void* dst, const void* src, size_t bytes, hipStream_t stream) {
  if (bytes == 0) return;
  if (!dst || !src || reinterpret_cast<uintptr_t>(dst) % 16 != 0 || reinterpret_cast<uintptr_t>(src) % 16 != 0)
    throw std::invalid_argument("copy_floor: dst and src must be non-null and 16-byte aligned");
  const int64_t units = static_cast<int64_t>(bytes / 16);
  const int64_t blocks = (units + kUnitsPerBlock - 1) / kUnitsPerBlock;
  if (blocks > INT32_MAX) throw std::invalid_argument("copy_floor: " + std::to_string(bytes) + " bytes need more than 2^31 blocks");
  const size_t body = static_cast<size_t>(units) * 16;
  copy_floor<<<static_cast<unsigned>(blocks > 0 ? blocks : 1), kThreads, 0, stream>>>(
      static_cast<uint4*>(dst), static_cast<const uint4*>(src), units, static_cast<uint8_t*>(dst) + body,
      static_cast<const uint8_t*>(src) + body, static_cast<int>(bytes - body));
  DSV4H_LAUNCH_CHECK("copy_floor");
}

}  // namespace dsv4h
