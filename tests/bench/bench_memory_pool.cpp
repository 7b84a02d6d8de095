// Benchmarks of the memory pool kernels (Google Benchmark, manual time from GPU events).
//
// Store (pack + scatter into the SWA pool, page 256) and gather (+ unpack) of N MODEL1 tokens, N in
// {256, 4096, 65536, 1M}, in two slot orders: scatter:1, every token at a random slot of the pool
// (a decode batch's tokens, each in its own request; the hard case), and scatter:0, runs of 256
// tokens filling a page, the pages in random order (the allocator's layout for a prefill, which
// hands out whole pages). Each timing sample launches K times back to back, queued behind a stream
// hold (GpuTimer), over rotating token ranges so that small N do not run from L2, and reports the
// mean device time per launch.
// Counters: bytes moved (1024 B bf16 latent + 584 B entry + 4 B slot per token, each way), GB/s,
// the device-to-device copy bandwidth measured in this process and the fraction of it reached.
// Decode sizes (1 to 256 tokens) compare with the empty kernel timed the same way (and
// with one timed right after each of their samples: counter ratio_to_empty), and so does a whole
// decode step (the translation, then one layer's store: two launches). Floors timed the
// same way: one and two dependent loads and a store, copies moving the same bytes (by the driver
// and by a copy kernel; the faster counts), and at
// the sizes of the bandwidth goals the store's and gather's bytes moved to and from the same slots
// without the format's arithmetic (BM_kv_*_floor); the store's also at the decode sizes, paired
// with the empty kernel as the store is, the floor of its ratio goal.
// Without a GPU the binary says so and exits 77 (skipped).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "bench_support.h"
#include "harness/gpu/device_tensor.h"
#include "harness/random.h"
#include "kernels/kv_pool.h"
#include "reference/kv_cache_model1.h"
#include "tests/bench/floors/kv_pool_floor.h"

namespace dsv4h {
namespace {

constexpr int64_t kMaxTokens = int64_t{1} << 20;
constexpr int64_t kPage = 256;
constexpr int64_t kPages = kMaxTokens / kPage + 1;  // page 0 is the sink
constexpr double kBytesPerToken = kv_model1_bytes_per_token();

// Device data every benchmark shares: 1M random latents, the SWA pool (every slot stored once), a
// shuffled slot per token (never slot 0), a full_to_swa identity map for the step benchmark, and
// the gather output.
struct Bench {
  hipStream_t stream = nullptr;
  DeviceBuffer latents, pool_bytes, slots, page_runs, full_to_swa, seq_lens, step_locs, gathered;
  KvPoolSet pools;
  double copy_ceiling_bytes_per_s = 0;

  Bench()
      : latents(kMaxTokens * 1024), pool_bytes(kPages * reference::model1_page_bytes(kPage)), slots(kMaxTokens * 4),
        page_runs(kMaxTokens * 4),
        full_to_swa(kPages * kPage * 4), seq_lens(kMaxTokens * 4), step_locs(3 * kMaxTokens * 4),
        gathered(kMaxTokens * 1024) {
    DSV4H_HIP_CHECK(hipStreamCreate(&stream));
    HostTensor block(DType::bf16, {16 << 20});  // 32 MB of random bf16, replicated
    Rng rng(2026);
    fill_normal(block, rng, 0.0, 3.0);
    for (size_t off = 0; off < latents.bytes(); off += block.nbytes())
      DSV4H_HIP_CHECK(hipMemcpy(static_cast<char*>(latents.data()) + off, block.bytes(),
                                std::min(block.nbytes(), latents.bytes() - off), hipMemcpyHostToDevice));
    std::vector<int32_t> s(kMaxTokens);
    std::iota(s.begin(), s.end(), static_cast<int32_t>(kPage));
    for (size_t i = s.size(); i > 1; --i) std::swap(s[i - 1], s[static_cast<size_t>(rng.integer(0, static_cast<int64_t>(i) - 1))]);
    DSV4H_HIP_CHECK(hipMemcpy(slots.data(), s.data(), slots.bytes(), hipMemcpyHostToDevice));
    std::vector<int32_t> pages(static_cast<size_t>(kPages - 1));
    std::iota(pages.begin(), pages.end(), 1);
    for (size_t i = pages.size(); i > 1; --i) std::swap(pages[i - 1], pages[static_cast<size_t>(rng.integer(0, static_cast<int64_t>(i) - 1))]);
    for (size_t i = 0; i < s.size(); ++i) s[i] = static_cast<int32_t>(pages[i / kPage] * kPage + static_cast<int64_t>(i % kPage));
    DSV4H_HIP_CHECK(hipMemcpy(page_runs.data(), s.data(), page_runs.bytes(), hipMemcpyHostToDevice));
    std::vector<int32_t> identity(static_cast<size_t>(kPages * kPage));
    std::iota(identity.begin(), identity.end(), 0);
    DSV4H_HIP_CHECK(hipMemcpy(full_to_swa.data(), identity.data(), full_to_swa.bytes(), hipMemcpyHostToDevice));
    std::vector<int32_t> lens(kMaxTokens);
    for (int32_t& l : lens) l = static_cast<int32_t>(rng.integer(1, 1 << 20));
    DSV4H_HIP_CHECK(hipMemcpy(seq_lens.data(), lens.data(), seq_lens.bytes(), hipMemcpyHostToDevice));
    pools.swa = KvPoolBuffer{static_cast<uint8_t*>(pool_bytes.data()), 1, kPages, kPage, reference::model1_page_bytes(kPage)};
    // Every slot a gather reads holds a stored entry, whichever benchmarks a run selects: the
    // shuffled slots are pages [1, kPages), as the page runs are. Memory as allocated is no entry,
    // and its scale bytes send the unpack down its rare path (a gather run alone took 837 us at 1M
    // shuffled tokens on the H200, 473 us after the stores had run).
    KvStepLocations all = step(0, kMaxTokens);
    all.swa_out_loc = static_cast<int32_t*>(slots.data());
    launch_kv_store_layer(pools, all, layer(0), stream);
    DSV4H_HIP_CHECK(hipStreamSynchronize(stream));
    // The copy ceiling: the 1 GiB latents, device to device.
    copy_ceiling_bytes_per_s = measure_copy_ceiling(gathered.data(), latents.data(), latents.bytes(), stream);
  }

  // The step of tokens [first, first + n): out_cache_loc are the shuffled slots, mapped to
  // themselves, so that the store scatters exactly as the store benchmark does.
  KvStepLocations step(int64_t first, int64_t n) {
    KvStepLocations s;
    s.full_to_swa = static_cast<const int32_t*>(full_to_swa.data());
    s.full_slots = kPages * kPage;
    s.out_cache_loc = static_cast<const int32_t*>(slots.data()) + first;
    s.seq_lens = static_cast<const int32_t*>(seq_lens.data()) + first;
    s.tokens = n;
    int32_t* locs = static_cast<int32_t*>(step_locs.data());
    s.swa_out_loc = locs + first;
    s.c4_out_loc = locs + kMaxTokens + first;
    s.c128_out_loc = locs + 2 * kMaxTokens + first;
    return s;
  }
  // Tokens [first, first + n) as a ratio-0 layer whose swa_out_loc are the shuffled slots.
  KvLayerStore layer(int64_t first) {
    KvLayerStore l;
    l.kv = static_cast<const uint16_t*>(latents.data()) + first * 512;
    return l;
  }
};

Bench& bench() {
  static Bench b;
  return b;
}

template <typename Launch>
void time_sets(benchmark::State& state, int64_t n, double bytes, Launch&& launch, bool paired_with_empty = false) {
  Bench& b = bench();
  const int64_t sets = std::min<int64_t>(64, kMaxTokens / n);
  time_back_to_back(state, b.stream, launches_per_sample(bytes), sets, [&](int64_t set) { launch(set * n); },
                    paired_with_empty);
  state.counters["tokens"] = static_cast<double>(n);
  state.counters["bytes"] = bytes;
  state.counters["GBps"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["copy_ceiling_GBps"] = b.copy_ceiling_bytes_per_s * 1e-9;
  state.counters["fraction_of_copy"] =
      benchmark::Counter(bytes / b.copy_ceiling_bytes_per_s, benchmark::Counter::kIsIterationInvariantRate);
}

// The slots of the benchmark's order (its second argument, scatter: 1 every token shuffled, 0 page runs).
int32_t* slots_of(const benchmark::State& state) {
  return static_cast<int32_t*>(state.range(1) ? bench().slots.data() : bench().page_runs.data());
}

// A benchmark of state.range(0) tokens at the slots of its order: `launch(first, n, slots)` stores
// or gathers tokens [first, first + n) at slots[0, n). Decode sizes (up to 256 tokens) are also
// timed against an empty kernel, sample by sample.
template <typename Launch>
void time_tokens(benchmark::State& state, Launch&& launch) {
  const int64_t n = state.range(0);
  int32_t* const slots = slots_of(state);
  time_sets(state, n, n * kBytesPerToken, [&](int64_t first) { launch(first, n, slots + first); }, n <= 256);
}

void BM_kv_store(benchmark::State& state) {
  Bench& b = bench();
  time_tokens(state, [&](int64_t first, int64_t n, int32_t* slots) {
    KvStepLocations s = b.step(first, n);
    s.swa_out_loc = slots;  // the slots themselves, no translation
    launch_kv_store_layer(b.pools, s, b.layer(first), b.stream);
  });
}

void BM_kv_gather(benchmark::State& state) {
  Bench& b = bench();
  time_tokens(state, [&](int64_t first, int64_t n, int32_t* slots) {
    launch_kv_gather_model1(b.pools.swa, 0, slots, n, static_cast<uint16_t*>(b.gathered.data()) + first * 512, b.stream);
  });
}

// A decode step as the engine runs it: translate once, then one layer's store.
void BM_kv_step(benchmark::State& state) {
  Bench& b = bench();
  const int64_t n = state.range(0);
  time_sets(state, n, n * (kBytesPerToken + 24), [&](int64_t first) {
    const KvStepLocations s = b.step(first, n);
    launch_kv_translate(s, b.stream);
    launch_kv_store_layer(b.pools, s, b.layer(first), b.stream);
  });
}

// Named apart from the other binaries' empty kernels: the GPU report merges benchmarks by name.
void BM_empty_kernel_pool(benchmark::State& state) { time_empty_kernel(state, bench().stream, launches_per_sample(0)); }

// The floors beside the kernels: one dependent load (a store's slot, then its write), and a copy
// moving the bytes of N tokens.
void BM_dependent_loads_pool(benchmark::State& state) {
  time_dependent_loads(state, bench().stream, launches_per_sample(0), static_cast<int>(state.range(0)));
}
// The floors of the bandwidth goals in the benchmarks' own slot orders: the store's and the
// gather's bytes between the same places, without the format's arithmetic (kv_pool_floor.h). The
// store's floor at decode sizes is timed paired with the empty kernel, as the store is.
void BM_kv_store_floor(benchmark::State& state) {
  Bench& b = bench();
  time_tokens(state, [&](int64_t first, int64_t n, int32_t* slots) {
    launch_kv_scatter_floor(b.pools.swa, static_cast<const uint16_t*>(b.latents.data()) + first * 512, slots, n, b.stream);
  });
}
void BM_kv_gather_floor(benchmark::State& state) {
  Bench& b = bench();
  time_tokens(state, [&](int64_t first, int64_t n, int32_t* slots) {
    launch_kv_gather_floor(b.pools.swa, slots, n, static_cast<uint16_t*>(b.gathered.data()) + first * 512, b.stream);
  });
}
void time_copy_same_bytes(benchmark::State& state, CopyBy by) {
  Bench& b = bench();
  const double moved = static_cast<double>(state.range(0)) * kBytesPerToken;
  time_device_copy(state, b.stream, b.gathered.data(), b.latents.data(), b.latents.bytes(), static_cast<size_t>(moved),
                   launches_per_sample(moved), by);
  state.counters["tokens"] = static_cast<double>(state.range(0));
  state.counters["copy_ceiling_GBps"] = b.copy_ceiling_bytes_per_s * 1e-9;
}
void BM_copy_same_bytes_pool(benchmark::State& state) { time_copy_same_bytes(state, CopyBy::kDriver); }
void BM_copy_kernel_same_bytes_pool(benchmark::State& state) { time_copy_same_bytes(state, CopyBy::kKernel); }

BENCHMARK(BM_dependent_loads_pool)->ArgName("depth")->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_copy_same_bytes_pool)->ArgName("tokens")->Arg(256)->Arg(4096)->Arg(65536)->Arg(1 << 20)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_copy_kernel_same_bytes_pool)->ArgName("tokens")->Arg(256)->Arg(4096)->Arg(65536)->Arg(1 << 20)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_empty_kernel_pool)->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_kv_store)->ArgNames({"tokens", "scatter"})->ArgsProduct({{1, 8, 64, 256}, {1}})
    ->ArgsProduct({{4096, 65536, 1 << 20}, {0, 1}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_kv_gather)->ArgNames({"tokens", "scatter"})->ArgsProduct({{256}, {1}})->ArgsProduct({{4096, 65536, 1 << 20}, {0, 1}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_kv_store_floor)->ArgNames({"tokens", "scatter"})->ArgsProduct({{1, 8, 64, 256}, {1}})
    ->ArgsProduct({{65536, 1 << 20}, {0, 1}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_kv_gather_floor)->ArgNames({"tokens", "scatter"})->ArgsProduct({{65536, 1 << 20}, {0, 1}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_kv_step)->ArgName("tokens")->Arg(1)->Arg(8)->Arg(64)->Arg(256)
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);

}  // namespace
}  // namespace dsv4h

int main(int argc, char** argv) {
  return dsv4h::run_benchmarks(argc, argv, [] {
    benchmark::AddCustomContext("copy_ceiling_GBps", std::to_string(dsv4h::bench().copy_ceiling_bytes_per_s * 1e-9));
  });
}
