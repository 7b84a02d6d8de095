// Benchmarks of filtered_silu_mul (Google Benchmark, manual time from GPU events).
//
// Shapes: R in {6, 384, 3072, 24576, 196608} token rows (tokens x top-6), I = 2048, kept fraction
// 1, 1/2, 1/8. Each timing sample launches the kernel K times back to back, queued behind a stream
// hold (GpuTimer), over rotating row ranges of a 2.4 GB pool, so that no launch finds its inputs in
// the 50 MB L2, and reports the mean device time per launch; each repetition takes 20 such samples
// and the median over 10 repetitions is reported. Counters: bytes moved (kept rows only, plus the
// ids), GB/s, fraction of the device-to-device copy bandwidth measured in this process
// (copy_ceiling_GBps), and FLOPs. Floors timed the same way: the empty kernel (the decode
// floor), two dependent loads and a store (the least a kernel that reads ids, then rows, can
// cost), and copies moving the same bytes, by the driver and by a copy kernel (the faster: what
// any kernel could reach at that size).
// Without a GPU the binary says so and exits 77 (skipped).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "bench_support.h"
#include "harness/gpu/device_tensor.h"
#include "harness/random.h"
#include "kernels/filtered_silu_mul.h"

namespace dsv4h {
namespace {

constexpr int64_t kInter = 2048;
constexpr int64_t kPoolRows = 196608;
constexpr double kSwigluLimit = 10.0;

// Device data shared by every benchmark: random bf16 gate_up for the largest R, its output, and
// expert ids per kept fraction (Bernoulli, fixed seed).
struct Pool {
  hipStream_t stream = nullptr;
  DeviceBuffer gate_up, out;
  std::vector<std::pair<int, DeviceBuffer>> ids_by_kept_permille;
  std::vector<std::pair<int, std::vector<int32_t>>> host_ids_by_kept_permille;
  double copy_ceiling_bytes_per_s = 0;

  Pool() : gate_up(kPoolRows * 2 * kInter * 2), out(kPoolRows * kInter * 2) {
    DSV4H_HIP_CHECK(hipStreamCreate(&stream));
    // 64 MiB of random bf16, replicated across the pool: no timing on zeros, no long host fill.
    HostTensor block(DType::bf16, {32 << 20});
    Rng rng(2026);
    fill_normal(block, rng, 0.0, 6.0);
    for (size_t off = 0; off < gate_up.bytes(); off += block.nbytes())
      DSV4H_HIP_CHECK(hipMemcpy(static_cast<char*>(gate_up.data()) + off, block.bytes(),
                                std::min(block.nbytes(), gate_up.bytes() - off), hipMemcpyHostToDevice));
    for (int permille : {1000, 500, 125}) {
      std::vector<int32_t> ids(kPoolRows);
      for (int32_t& id : ids) id = rng.uniform() * 1000 < permille ? static_cast<int32_t>(rng.integer(0, 255)) : -1;
      DeviceBuffer d(ids.size() * 4);
      DSV4H_HIP_CHECK(hipMemcpy(d.data(), ids.data(), ids.size() * 4, hipMemcpyHostToDevice));
      ids_by_kept_permille.emplace_back(permille, std::move(d));
      host_ids_by_kept_permille.emplace_back(permille, std::move(ids));
    }
    // The copy ceiling: the 805 MB output pool's size, device to device.
    copy_ceiling_bytes_per_s = measure_copy_ceiling(out.data(), gate_up.data(), out.bytes(), stream);
  }

  const DeviceBuffer& ids(int permille) const {
    for (const auto& [p, d] : ids_by_kept_permille) if (p == permille) return d;
    throw std::logic_error("no ids for this kept fraction");
  }
  const std::vector<int32_t>& host_ids(int permille) const {
    for (const auto& [p, h] : host_ids_by_kept_permille) if (p == permille) return h;
    throw std::logic_error("no ids for this kept fraction");
  }
};

Pool& pool() {
  static Pool p;
  return p;
}

void BM_filtered_silu_mul(benchmark::State& state) {
  Pool& p = pool();
  const int64_t rows = state.range(0);
  const int permille = static_cast<int>(state.range(1));
  const int64_t sets = std::min<int64_t>(64, kPoolRows / rows);
  const std::vector<int32_t>& ids = p.host_ids(permille);
  int64_t kept_rows_all_sets = 0;
  for (int64_t r = 0; r < sets * rows; ++r) kept_rows_all_sets += ids[r] != -1;
  const double kept_rows = static_cast<double>(kept_rows_all_sets) / sets;
  const double bytes = kept_rows * kInter * 6 + rows * 4;  // the count of the descriptor's work()
  const int64_t k = launches_per_sample(bytes);

  auto launch = [&](int64_t set) {
    FilteredSiluMulArgs args;
    args.gate_up = static_cast<const uint16_t*>(p.gate_up.data()) + set * rows * 2 * kInter;
    args.expert_ids = static_cast<const int32_t*>(p.ids(permille).data()) + set * rows;
    args.out = static_cast<uint16_t*>(p.out.data()) + set * rows * kInter;
    args.rows = rows;
    args.inter = kInter;
    args.expert_step = 1;
    args.swiglu_limit = static_cast<float>(kSwigluLimit);
    launch_filtered_silu_mul(args, p.stream);
  };
  time_back_to_back(state, p.stream, k, sets, launch);
  state.counters["rows"] = static_cast<double>(rows);
  state.counters["kept_rows"] = kept_rows;
  state.counters["bytes"] = bytes;
  state.counters["flops"] = kept_rows * kInter * 4;
  state.counters["GBps"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["copy_ceiling_GBps"] = p.copy_ceiling_bytes_per_s * 1e-9;
}

void BM_empty_kernel(benchmark::State& state) { time_empty_kernel(state, pool().stream, launches_per_sample(0)); }

// The floor of any kernel that loads its data after its ids: two dependent loads and a store.
void BM_dependent_loads(benchmark::State& state) {
  time_dependent_loads(state, pool().stream, launches_per_sample(0), static_cast<int>(state.range(0)));
}

// A copy moving the bytes of R all-kept rows, by the driver or by a copy kernel: what the same
// bytes cost at this size (the faster of the two is the floor).
void time_copy_same_bytes(benchmark::State& state, CopyBy by) {
  Pool& p = pool();
  const int64_t moved = state.range(0) * kInter * 6;
  time_device_copy(state, p.stream, p.out.data(), p.gate_up.data(), p.out.bytes(), moved, launches_per_sample(moved), by);
  state.counters["rows"] = static_cast<double>(state.range(0));
  state.counters["copy_ceiling_GBps"] = p.copy_ceiling_bytes_per_s * 1e-9;
}
void BM_copy_same_bytes(benchmark::State& state) { time_copy_same_bytes(state, CopyBy::kDriver); }
void BM_copy_kernel_same_bytes(benchmark::State& state) { time_copy_same_bytes(state, CopyBy::kKernel); }

BENCHMARK(BM_empty_kernel)->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_dependent_loads)->ArgName("depth")->Arg(1)->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_copy_same_bytes)
    ->ArgName("rows")
    ->Arg(6)->Arg(384)->Arg(3072)->Arg(24576)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->Repetitions(10)
    ->Iterations(20);
BENCHMARK(BM_copy_kernel_same_bytes)
    ->ArgName("rows")
    ->Arg(6)->Arg(384)->Arg(3072)->Arg(24576)
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->Repetitions(10)
    ->Iterations(20);
BENCHMARK(BM_filtered_silu_mul)
    ->ArgNames({"rows", "kept_permille"})
    ->ArgsProduct({{6, 384, 3072, 24576, 196608}, {1000, 500, 125}})
    ->UseManualTime()
    ->Unit(benchmark::kMicrosecond)
    ->Repetitions(10)
    ->Iterations(20);

}  // namespace
}  // namespace dsv4h

int main(int argc, char** argv) {
  return dsv4h::run_benchmarks(argc, argv, [] {
    benchmark::AddCustomContext("copy_ceiling_GBps", std::to_string(dsv4h::pool().copy_ceiling_bytes_per_s * 1e-9));
  });
}
