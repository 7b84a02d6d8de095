// The benchmarks' floor kernels must do what they claim, else they are not the floors they claim to
// be: the chain of dependent loads follows its chain, the pool's scatter and gather floors move the
// MODEL1 store's and gather's bytes between the same places, the copy floor copies its bytes. (Their stream hold is checked by each
// benchmark binary before it times anything: tests/bench/bench_support.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <vector>

#include "gpu_env.h"
#include "harness/gpu/device_tensor.h"
#include "harness/random.h"
#include "tests/bench/floors/copy_floor.h"
#include "tests/bench/floors/kv_pool_floor.h"
#include "tests/bench/floors/latency_floor.h"

namespace dsv4h {
namespace {

constexpr int32_t kUnwritten = 0x7fffffff;

struct Chain {
  std::vector<int32_t> next;  // entry e at next[e * kChainStride]; the rest poisoned
  DeviceBuffer chain{kChainEntries * kChainStride * sizeof(int32_t)}, out{kChainEntries * sizeof(int32_t)};

  explicit Chain(uint64_t seed) : next(kChainEntries * kChainStride, kUnwritten) {
    Rng rng(seed);
    std::printf("chain seed %llu\n", static_cast<unsigned long long>(seed));
    for (int e = 0; e < kChainEntries; ++e) next[e * kChainStride] = static_cast<int32_t>(rng.integer(0, kChainEntries - 1));
    DSV4H_HIP_CHECK(hipMemcpy(chain.data(), next.data(), chain.bytes(), hipMemcpyHostToDevice));
    const std::vector<int32_t> poison(kChainEntries, kUnwritten);
    DSV4H_HIP_CHECK(hipMemcpy(out.data(), poison.data(), out.bytes(), hipMemcpyHostToDevice));
  }
  void launch(int depth, hipStream_t stream) const {
    launch_dependent_loads(static_cast<const int32_t*>(chain.data()), static_cast<int32_t*>(out.data()), depth, stream);
  }
  std::vector<int32_t> expected(int depth) const {
    std::vector<int32_t> e(kChainEntries);
    for (int t = 0; t < kChainEntries; ++t) {
      int32_t at = t;
      for (int d = 0; d < depth; ++d) at = next[at * kChainStride];
      e[t] = at;
    }
    return e;
  }
  std::vector<int32_t> result() const {
    std::vector<int32_t> r(kChainEntries);
    DSV4H_HIP_CHECK(hipMemcpy(r.data(), out.data(), out.bytes(), hipMemcpyDeviceToHost));
    return r;
  }
};

TEST(LatencyFloor, DependentLoadsFollowTheChain) {
  DSV4H_GPU_OR_SKIP(gpu);
  for (int depth : {0, 1, 2, 3, 5}) {
    const Chain c(1000 + depth);
    c.launch(depth, nullptr);
    DSV4H_HIP_CHECK(hipStreamSynchronize(nullptr));
    EXPECT_EQ(c.result(), c.expected(depth)) << "depth " << depth;
  }
  EXPECT_THROW(launch_dependent_loads(nullptr, nullptr, -1, nullptr), std::invalid_argument);
}

// A pool of pages of 4 entries (the MODEL1 page layout: entries of 576 bytes, then 8 scale bytes
// each) with room for twice the rows, and rows of 1024 random bytes, with their slots: distinct
// shuffled slots, the sink (0) and -1 among them. A decode's few rows and a bulk store's many take
// different grids (kv_pool_launch.h), so the tests take both.
struct FloorCase {
  static constexpr int64_t kTokensPerPage = 4, kPageBytes = 2336;
  const int64_t row_count, page_count;
  std::vector<uint8_t> rows, pool;
  std::vector<int32_t> slots;
  DeviceBuffer rows_d, pool_d, slots_d;
  KvPoolBuffer buffer;

  FloorCase(uint64_t seed, int64_t rows_wanted)
      : row_count(rows_wanted), page_count(rows_wanted / 2 + 2), rows(row_count * 1024), pool(page_count * kPageBytes),
        rows_d(row_count * 1024), pool_d(page_count * kPageBytes), slots_d(row_count * sizeof(int32_t)),
        buffer{nullptr, 1, page_count, kTokensPerPage, kPageBytes} {
    Rng rng(seed);
    std::printf("floor seed %llu, %lld rows\n", static_cast<unsigned long long>(seed), static_cast<long long>(row_count));
    for (uint8_t& b : rows) b = static_cast<uint8_t>(rng.integer(0, 255));
    for (uint8_t& b : pool) b = static_cast<uint8_t>(rng.integer(0, 255));
    std::vector<int32_t> all(page_count * kTokensPerPage - 1);
    std::iota(all.begin(), all.end(), 1);
    for (size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[static_cast<size_t>(rng.integer(0, static_cast<int64_t>(i) - 1))]);
    slots.assign(all.begin(), all.begin() + row_count);
    slots[3] = 0, slots[7] = -1;
    DSV4H_HIP_CHECK(hipMemcpy(rows_d.data(), rows.data(), rows.size(), hipMemcpyHostToDevice));
    DSV4H_HIP_CHECK(hipMemcpy(pool_d.data(), pool.data(), pool.size(), hipMemcpyHostToDevice));
    DSV4H_HIP_CHECK(hipMemcpy(slots_d.data(), slots.data(), slots_d.bytes(), hipMemcpyHostToDevice));
    buffer.base = static_cast<uint8_t*>(pool_d.data());
  }
  // Byte k of slot s's 584: the entry's bytes, then its scale bytes.
  int64_t pool_offset(int32_t s, int k) const {
    const int64_t page = s / kTokensPerPage, entry = s % kTokensPerPage;
    return page * kPageBytes + (k < 576 ? entry * 576 + k : kTokensPerPage * 576 + entry * 8 + (k - 576));
  }
  std::vector<uint8_t> download(const DeviceBuffer& b) const {
    std::vector<uint8_t> host(b.bytes());
    DSV4H_HIP_CHECK(hipMemcpy(host.data(), b.data(), host.size(), hipMemcpyDeviceToHost));
    return host;
  }
};

// Rows on both sides of the store's one-step limit (kStoreOneStepTokens, 4096).
constexpr int64_t kFloorRowCounts[] = {12, 4100};

TEST(LatencyFloor, KvScatterFloorMovesTheStoresBytes) {
  DSV4H_GPU_OR_SKIP(gpu);
  for (const int64_t n : kFloorRowCounts) {
    FloorCase c(2026, n);
    std::vector<uint8_t> expected = c.pool;
    for (int64_t t = 0; t < c.row_count; ++t)
      if (c.slots[t] > 0)
        for (int k = 0; k < 584; ++k) expected[c.pool_offset(c.slots[t], k)] = c.rows[t * 1024 + k];
    launch_kv_scatter_floor(c.buffer, static_cast<const uint16_t*>(c.rows_d.data()), static_cast<const int32_t*>(c.slots_d.data()),
                            c.row_count, nullptr);
    DSV4H_HIP_CHECK(hipStreamSynchronize(nullptr));
    EXPECT_TRUE(c.download(c.pool_d) == expected) << n << " rows: a pool byte differs";
  }
  FloorCase c(2026, 12);
  EXPECT_THROW(launch_kv_scatter_floor(c.buffer, nullptr, nullptr, 1, nullptr), std::invalid_argument);
}

TEST(LatencyFloor, KvGatherFloorMovesTheGathersBytes) {
  DSV4H_GPU_OR_SKIP(gpu);
  FloorCase c(2027, 12);
  std::vector<uint8_t> expected(c.row_count * 1024, 0);
  for (int64_t t = 0; t < c.row_count; ++t)
    if (c.slots[t] >= 0)
      for (int k = 0; k < 584; ++k) expected[t * 1024 + k] = c.pool[c.pool_offset(c.slots[t], k)];
  launch_kv_gather_floor(c.buffer, static_cast<const int32_t*>(c.slots_d.data()), c.row_count,
                         static_cast<uint16_t*>(c.rows_d.data()), nullptr);  // over the random rows: every byte is written
  DSV4H_HIP_CHECK(hipStreamSynchronize(nullptr));
  EXPECT_EQ(c.download(c.rows_d), expected);
  EXPECT_THROW(launch_kv_gather_floor(c.buffer, static_cast<const int32_t*>(c.slots_d.data()), -1, nullptr, nullptr),
               std::invalid_argument);
}

// The copy floor moves exactly `bytes`: every byte of [0, bytes) copied, the poison after it left,
// at sizes around its 16-byte units and its 16-KB blocks (a tail of 0 to 15 bytes).
TEST(LatencyFloor, CopyFloorCopiesExactlyItsBytes) {
  DSV4H_GPU_OR_SKIP(gpu);
  Rng rng(2028);
  std::printf("copy floor seed 2028\n");
  for (const size_t bytes : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{16384}, size_t{16384 + 16},
                             size_t{(1 << 20) + 5}}) {
    std::vector<uint8_t> src(bytes), dst(bytes + 64, 0xa5);
    for (uint8_t& b : src) b = static_cast<uint8_t>(rng.integer(0, 255));
    DeviceBuffer src_d(bytes), dst_d(dst.size());
    DSV4H_HIP_CHECK(hipMemcpy(src_d.data(), src.data(), bytes, hipMemcpyHostToDevice));
    DSV4H_HIP_CHECK(hipMemcpy(dst_d.data(), dst.data(), dst.size(), hipMemcpyHostToDevice));
    launch_copy_floor(dst_d.data(), src_d.data(), bytes, nullptr);
    DSV4H_HIP_CHECK(hipStreamSynchronize(nullptr));
    std::vector<uint8_t> expected = dst;
    std::copy(src.begin(), src.end(), expected.begin());
    DSV4H_HIP_CHECK(hipMemcpy(dst.data(), dst_d.data(), dst.size(), hipMemcpyDeviceToHost));
    EXPECT_TRUE(dst == expected) << bytes << " bytes: a byte differs";
  }
  DeviceBuffer buffer(64);
  EXPECT_THROW(launch_copy_floor(static_cast<char*>(buffer.data()) + 1, buffer.data(), 16, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace dsv4h
