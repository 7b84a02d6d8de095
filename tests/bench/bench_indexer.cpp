// Benchmarks of the C4 lightning indexer's decode path (issue 29; Google Benchmark, manual time
// from GPU events): one query row per request, bs in {1, 8, 64, 128}, ctx in {8K, 64K} tokens (c4
// lengths 2K and 16K), 64 heads, index_topk 512. BM_indexer_decode times the whole chain as an
// engine runs it: the query's rope, Hadamard rotation and fp8 quantisation, the scores over the
// row's C4 pages, the top-k and the page translation (four launches). Each row owns 256 random
// pages of one pool of 128 x 256 pages (277 MB, beyond the 50 MB L2), with random fp8 codes.
//
// Counters: bytes (what the chain must read and write at least: the visible entries' 132 bytes,
// the bf16 query and weights, the selected slots; the scores it writes and reads back are not
// counted), flops (2 per entry, head and channel), GB/s and TFLOP/s. Floors in the same run:
// BM_copy_same_bytes_indexer and BM_copy_kernel_same_bytes_indexer move the counted bytes (the byte
// floor; the faster counts). The FLOP floor, the dense fp8 rate, comes from the peers' run
// (tests/peers/indexer.py: torch._scaled_mm of the same FLOPs), which also writes floor_us, the
// larger of its copy of the same bytes and that GEMM: the goal's "larger floor".
// BM_indexer_scores/kernel:{0,1} times the scoring kernel alone, each of the two.
// BM_indexer_prefill/tokens:8192 times the same kernels on a prefill: 8192 query rows of one
// request at positions 0..8191, each with the request's page table row (the scoring kernel has no
// reuse across the rows of a request: each row reads the pages it sees).
// Without a GPU the binary says so and exits 77 (skipped).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "bench_support.h"
#include "harness/gpu/device_tensor.h"
#include "harness/random.h"
#include "kernels/indexer.h"
#include "reference/rope.h"

namespace dsv4h {
namespace {

constexpr int64_t kHeads = 64, kDim = 128, kTopk = 512, kMaxBs = 128, kMaxPages = 65536 / 4 / 64;
constexpr int64_t kPageBytes = kIndexerC4PageEntries * 132;
constexpr int64_t kPoolPages = kMaxBs * kMaxPages + 1;
constexpr int64_t kPrefillTokens = 8192, kPrefillPages = kPrefillTokens / 4 / 64;

template <typename T>
DeviceBuffer upload(const std::vector<T>& host) {
  DeviceBuffer d(host.size() * sizeof(T));
  DSV4H_HIP_CHECK(hipMemcpy(d.data(), host.data(), d.bytes(), hipMemcpyHostToDevice));
  return d;
}

// Device data of the largest shape; smaller ones use its first rows and pages.
struct Bench {
  hipStream_t stream = nullptr;
  DeviceBuffer pool, q, weights, page_table, q_fp8, q_scale, logits, indices, slots, copy_src, copy_dst;
  DeviceBuffer prefill_q, prefill_weights, prefill_positions, prefill_table;
  std::map<int64_t, DeviceBuffer> positions;  // by ctx: every row at p = ctx - 1
  double copy_ceiling_bytes_per_s = 0;

  Bench() {
    DSV4H_HIP_CHECK(hipStreamCreate(&stream));
    Rng rng(29);
    // Random fp8 codes (never the NaN codes 0x7f, 0xff) and scales of 2^-3 .. 2^3.
    std::vector<uint8_t> page_bytes(static_cast<size_t>(kPoolPages * kPageBytes));
    for (int64_t p = 0; p < kPoolPages; ++p) {
      uint8_t* page = page_bytes.data() + p * kPageBytes;
      for (int64_t i = 0; i < kIndexerC4PageEntries * kDim; ++i) {
        const uint8_t b = static_cast<uint8_t>(rng.integer(0, 255));
        page[i] = (b & 0x7f) == 0x7f ? static_cast<uint8_t>(b ^ 1) : b;
      }
      for (int64_t e = 0; e < kIndexerC4PageEntries; ++e) {
        const float scale = std::ldexp(1.f, static_cast<int>(rng.integer(-3, 3)));
        std::memcpy(page + kIndexerC4PageEntries * kDim + e * 4, &scale, 4);
      }
    }
    pool = upload(page_bytes);
    std::vector<uint16_t> q_bits(static_cast<size_t>(kMaxBs * kHeads * kDim));
    for (uint16_t& b : q_bits) b = static_cast<uint16_t>(0x3c00 + rng.integer(0, 0x7ff)) ^ (rng.integer(0, 1) ? 0x8000 : 0);
    q = upload(q_bits);
    std::vector<float> w(static_cast<size_t>(kMaxBs * kHeads));
    for (float& x : w) x = static_cast<float>(rng.normal() / 90.5);
    weights = upload(w);
    std::vector<int32_t> table(static_cast<size_t>(kMaxBs * kMaxPages));
    std::iota(table.begin(), table.end(), 1);
    for (size_t i = table.size(); i > 1; --i) std::swap(table[i - 1], table[static_cast<size_t>(rng.integer(0, i - 1))]);
    page_table = upload(table);
    for (int64_t ctx : {8192, 65536}) positions.emplace(ctx, upload(std::vector<int32_t>(kMaxBs, static_cast<int32_t>(ctx - 1))));
    std::vector<uint16_t> prefill_bits(static_cast<size_t>(kPrefillTokens * kHeads * kDim));
    for (size_t i = 0; i < prefill_bits.size(); ++i) prefill_bits[i] = q_bits[i % q_bits.size()];
    prefill_q = upload(prefill_bits);
    std::vector<float> prefill_w(static_cast<size_t>(kPrefillTokens * kHeads));
    for (size_t i = 0; i < prefill_w.size(); ++i) prefill_w[i] = w[i % w.size()];
    prefill_weights = upload(prefill_w);
    std::vector<int32_t> prefill_pos(kPrefillTokens), prefill_rows;
    std::iota(prefill_pos.begin(), prefill_pos.end(), 0);
    prefill_positions = upload(prefill_pos);
    for (int64_t r = 0; r < kPrefillTokens; ++r) prefill_rows.insert(prefill_rows.end(), table.begin(), table.begin() + kPrefillPages);
    prefill_table = upload(prefill_rows);
    const int64_t rows = std::max(kMaxBs, kPrefillTokens);
    q_fp8 = DeviceBuffer(rows * kHeads * kDim);
    q_scale = DeviceBuffer(rows * kHeads * 4);
    logits = DeviceBuffer(std::max(kMaxBs * kMaxPages, kPrefillTokens * kPrefillPages) * 64 * 4);
    indices = DeviceBuffer(rows * kTopk * 4);
    slots = DeviceBuffer(rows * kTopk * 4);
    copy_src = DeviceBuffer(pool.bytes());
    copy_dst = DeviceBuffer(pool.bytes());
    copy_ceiling_bytes_per_s = measure_copy_ceiling(copy_dst.data(), pool.data(), pool.bytes(), stream);
  }

  // The decode chain of bs rows at ctx; the page table is as wide as ctx needs.
  void decode(int64_t bs, int64_t ctx) {
    chain(bs, ctx / 4 / 64, static_cast<const uint16_t*>(q.data()), static_cast<const float*>(weights.data()),
          static_cast<const int32_t*>(positions.at(ctx).data()), static_cast<const int32_t*>(page_table.data()));
  }
  void prefill() {
    chain(kPrefillTokens, kPrefillPages, static_cast<const uint16_t*>(prefill_q.data()),
          static_cast<const float*>(prefill_weights.data()), static_cast<const int32_t*>(prefill_positions.data()),
          static_cast<const int32_t*>(prefill_table.data()));
  }
  // The scores' arguments: the query's codes and scales as launch_indexer_query leaves them.
  IndexerLogitsArgs logits_args(int64_t rows, int64_t pages, const float* head_weights, const int32_t* pos,
                                const int32_t* table) {
    IndexerLogitsArgs la{};
    la.q_fp8 = static_cast<const uint8_t*>(q_fp8.data());
    la.q_scale = static_cast<const float*>(q_scale.data());
    la.weights = head_weights;
    la.positions = pos;
    la.page_table = table;
    la.cache = static_cast<const uint8_t*>(pool.data());
    la.logits = static_cast<float*>(logits.data());
    la.rows = rows;
    la.heads = kHeads;
    la.pages = pages;
    la.pool_pages = kPoolPages;
    return la;
  }
  // Query, scores, top-k and page slots of `rows` query rows over page tables `pages` wide.
  void chain(int64_t rows, int64_t pages, const uint16_t* query, const float* head_weights, const int32_t* pos,
             const int32_t* table) {
    IndexerQueryArgs qa{};
    qa.q = query;
    qa.positions = pos;
    qa.q_fp8 = static_cast<uint8_t*>(q_fp8.data());
    qa.q_scale = static_cast<float*>(q_scale.data());
    static const Eigen::VectorXd freqs = reference::rope_frequencies(reference::rope_for_ratio(4));
    for (int i = 0; i < 32; ++i) qa.freqs[i] = freqs(i);
    qa.rows = rows;
    qa.heads = kHeads;
    launch_indexer_query(qa, stream);
    const IndexerLogitsArgs la = logits_args(rows, pages, head_weights, pos, table);
    launch_indexer_logits(la, stream);
    launch_indexer_topk({la.logits, pos, static_cast<int32_t*>(indices.data()), rows, pages * 64, kTopk}, stream);
    launch_indexer_page_slots({static_cast<const int32_t*>(indices.data()), la.page_table,
                               static_cast<int32_t*>(slots.data()), rows, kTopk, pages},
                              stream);
  }
};

Bench& bench() {
  static Bench b;
  return b;
}

// What the chain must move at least, and its FLOPs, for rows seeing `visible` entries in all: the
// visible entries' 132 bytes, each row's bf16 query, head weights and selected slots. Not one
// stage's work() (harness/components/indexer.cpp): each stage's counts the intermediates it reads
// or writes (fp8 codes, scores, raw indices), which the chain's least traffic leaves out (and
// tests/peers/indexer.py's copy floor counts as here). The visible count is the kernels' own.
double chain_bytes(int64_t rows, double visible) {
  return visible * 132 + static_cast<double>(rows) * (kHeads * kDim * 2 + kHeads * 4 + kTopk * 4);
}
double chain_flops(double visible) { return 2.0 * visible * kHeads * kDim; }

// A decode step: every row at position ctx - 1, its page table ctx / 4 / 64 pages wide.
double decode_visible(int64_t bs, int64_t ctx) {
  return static_cast<double>(bs * indexer_visible_entries(ctx - 1, ctx / 4 / 64 * kIndexerC4PageEntries));
}
double bytes_of(int64_t bs, int64_t ctx) { return chain_bytes(bs, decode_visible(bs, ctx)); }
double flops_of(int64_t bs, int64_t ctx) { return chain_flops(decode_visible(bs, ctx)); }

void BM_indexer_decode(benchmark::State& state) {
  // A narrower ctx reads the page table as rows of its own width: still distinct pages a row.
  const int64_t bs = state.range(0), ctx = state.range(1);
  Bench& b = bench();
  const double bytes = bytes_of(bs, ctx);
  time_back_to_back(state, b.stream, launches_per_sample(bytes), 1, [&](int64_t) { b.decode(bs, ctx); });
  state.counters["bytes"] = bytes;
  state.counters["flops"] = flops_of(bs, ctx);
  state.counters["GBps"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["TFLOPps"] = benchmark::Counter(flops_of(bs, ctx) * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["copy_ceiling_GBps"] = b.copy_ceiling_bytes_per_s * 1e-9;
  state.counters["fraction_of_copy"] =
      benchmark::Counter(bytes / b.copy_ceiling_bytes_per_s, benchmark::Counter::kIsIterationInvariantRate);
}

// The scores alone by kernel, kernel 0 the fp32 FMA one (AMD's path), 1 the tensor-core one (NVIDIA's,
// what BM_indexer_decode runs there): what the chain's scores cost and what the tensor cores gain.
// Bytes and FLOPs as BM_indexer_decode's (the scores' own reads are the same entries).
void BM_indexer_scores(benchmark::State& state) {
  const int64_t kernel = state.range(0), bs = state.range(1), ctx = state.range(2);
  Bench& b = bench();
#if !defined(DSV4H_GPU_NVIDIA)
  if (kernel == 1) {
    state.SkipWithError("no tensor-core scoring kernel on this platform");
    return;
  }
#endif
  b.decode(bs, ctx);  // the query's codes and scales
  const IndexerLogitsArgs la = b.logits_args(bs, ctx / 4 / 64, static_cast<const float*>(b.weights.data()),
                                             static_cast<const int32_t*>(b.positions.at(ctx).data()),
                                             static_cast<const int32_t*>(b.page_table.data()));
  const double bytes = bytes_of(bs, ctx);
  time_back_to_back(state, b.stream, launches_per_sample(bytes), 1, [&](int64_t) {
#if defined(DSV4H_GPU_NVIDIA)
    if (kernel == 1) return launch_indexer_logits_mma(la, b.stream);
#endif
    launch_indexer_logits_fma(la, b.stream);
  });
  state.counters["bytes"] = bytes;
  state.counters["flops"] = flops_of(bs, ctx);
  state.counters["TFLOPps"] = benchmark::Counter(flops_of(bs, ctx) * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["fraction_of_copy"] =
      benchmark::Counter(bytes / b.copy_ceiling_bytes_per_s, benchmark::Counter::kIsIterationInvariantRate);
}

// Prefill: the request's entries once, every row's bf16 query and weights, its selected slots;
// 2 FLOPs per visible (row, entry), head and channel.
void BM_indexer_prefill(benchmark::State& state) {
  Bench& b = bench();
  double visible = 0;
  for (int64_t p = 0; p < kPrefillTokens; ++p)
    visible += static_cast<double>(indexer_visible_entries(p, kPrefillPages * kIndexerC4PageEntries));
  // The request's entries are read once, whatever the rows that see them.
  const double bytes = chain_bytes(kPrefillTokens, static_cast<double>(kPrefillTokens / 4));
  const double flops = chain_flops(visible);
  time_back_to_back(state, b.stream, launches_per_sample(bytes), 1, [&](int64_t) { b.prefill(); });
  state.counters["tokens"] = static_cast<double>(kPrefillTokens);
  state.counters["bytes"] = bytes;
  state.counters["flops"] = flops;
  state.counters["GBps"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["TFLOPps"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
}

void time_copy_same_bytes(benchmark::State& state, CopyBy by) {
  Bench& b = bench();
  const double moved = bytes_of(state.range(0), state.range(1));
  time_device_copy(state, b.stream, b.copy_dst.data(), b.copy_src.data(), b.copy_src.bytes(), static_cast<size_t>(moved),
                   launches_per_sample(moved), by);
  state.counters["copy_ceiling_GBps"] = b.copy_ceiling_bytes_per_s * 1e-9;
}
void BM_copy_same_bytes_indexer(benchmark::State& state) { time_copy_same_bytes(state, CopyBy::kDriver); }
void BM_copy_kernel_same_bytes_indexer(benchmark::State& state) { time_copy_same_bytes(state, CopyBy::kKernel); }

#define DSV4H_INDEXER_SHAPES ArgNames({"bs", "ctx"})->ArgsProduct({{1, 8, 64, 128}, {8192, 65536}}) \
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20)
BENCHMARK(BM_indexer_decode)->DSV4H_INDEXER_SHAPES;
BENCHMARK(BM_indexer_scores)->ArgNames({"kernel", "bs", "ctx"})->ArgsProduct({{0, 1}, {1, 8, 64, 128}, {8192, 65536}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_indexer_prefill)->ArgName("tokens")->Arg(kPrefillTokens)->UseManualTime()->Unit(benchmark::kMicrosecond)
    ->Repetitions(5)->Iterations(3);
BENCHMARK(BM_copy_same_bytes_indexer)->DSV4H_INDEXER_SHAPES;
BENCHMARK(BM_copy_kernel_same_bytes_indexer)->DSV4H_INDEXER_SHAPES;

}  // namespace
}  // namespace dsv4h

int main(int argc, char** argv) {
  return dsv4h::run_benchmarks(argc, argv, [] {
    benchmark::AddCustomContext("copy_ceiling_GBps", std::to_string(dsv4h::bench().copy_ceiling_bytes_per_s * 1e-9));
  });
}
