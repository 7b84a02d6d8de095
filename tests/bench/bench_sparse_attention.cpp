// Benchmarks of sparse_attention (issue 30; Google Benchmark, manual time from GPU events).
//
// Decode with 64 heads at bs 1, 8, 64, 128, 256: a C4 layer (512 selected entries) and a C128
// layer, every row at position ctx - 1 for ctx 8K and 64K. Inputs are the descriptor's own
// (sparse_attention(bs=..,ratio=..,pos=ctx-1,ctx=..,holes=0)): each row its own request, its keys at
// distinct slots, so the unique entries read are bs x (128 + 512) for C4 and bs x (128 + ctx/128)
// for C128. Bytes and FLOPs are the descriptor's work(), counted as FlashMLA does: unique KV
// entries x 584 B + q + out (+ lse); 2 x heads x attended x (512 + 512) FLOPs.
// Floors timed the same way: copies of the same bytes by the driver and by a copy kernel (the
// faster is what any kernel could reach at that size; the copy kernel is also the "one kernel
// reading the same bytes" floor of bs 1), and the empty kernel.
// Prefill (launch_sparse_attention_prefill): one request's 2K and 8K tokens from position 0 on a C4
// and a C128 layer, counted the same way, and its floor: the dense bf16 matrix rate, a cuBLAS GEMM
// (floors/dense_gemm_floor.h) of about the same FLOPs in the same run, its time scaled to exactly
// them (BM_dense_bf16_same_flops_attention_prefill; skipped where no cuBLAS loads).
// Without a GPU the binary says so and exits 77 (skipped).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "bench_support.h"
#include "harness/component.h"
#include "harness/gpu/device_tensor.h"
#include "tests/bench/floors/dense_gemm_floor.h"

namespace dsv4h {
namespace {

constexpr int64_t kHeads = 64;
constexpr size_t kCopyPoolBytes = size_t{512} << 20;

struct Prepared {
  Case c;
  DeviceTensorMap inputs, outputs;
  WorkCount work;
};

struct Pool {
  hipStream_t stream = nullptr;
  DeviceBuffer copy_src, copy_dst;
  double copy_ceiling_bytes_per_s = 0;
  std::map<std::string, std::unique_ptr<Prepared>> cases;

  Pool() : copy_src(kCopyPoolBytes), copy_dst(kCopyPoolBytes) {
    DSV4H_HIP_CHECK(hipStreamCreate(&stream));
    copy_ceiling_bytes_per_s = measure_copy_ceiling(copy_dst.data(), copy_src.data(), kCopyPoolBytes, stream);
  }

  // A decode step of bs rows at position ctx - 1.
  Prepared& get(int64_t bs, int64_t ratio, int64_t ctx) {
    return get_case("sparse_attention(bs=" + std::to_string(bs) + ",heads=" + std::to_string(kHeads) + ",ratio=" +
                    std::to_string(ratio) + ",pos=" + std::to_string(ctx - 1) + ",ctx=" + std::to_string(ctx) + ",holes=0)");
  }

  // A prefill of `tokens` rows of one request from position 0.
  Prepared& get_prefill(int64_t tokens, int64_t ratio) {
    return get_case("sparse_attention(bs=" + std::to_string(tokens) + ",heads=" + std::to_string(kHeads) + ",ratio=" +
                    std::to_string(ratio) + ",prefill=1,pos=0,ctx=" + std::to_string(tokens) + ",holes=0)");
  }

  // The descriptor's inputs of `text` on the device, made once.
  Prepared& get_case(const std::string& text) {
    std::unique_ptr<Prepared>& p = cases[text];
    if (!p) {
      const Component& component = registry().get("sparse_attention");
      const Case c = parse_case(text);
      const TensorMap host = component.make_inputs(c);
      p = std::make_unique<Prepared>(Prepared{c, DeviceTensorMap::upload(host),
                                              DeviceTensorMap::like(component.make_outputs(c)), component.work(c, host)});
    }
    return *p;
  }
};

Pool& pool() {
  static Pool p;
  return p;
}

void BM_sparse_attention(benchmark::State& state) {
  Pool& p = pool();
  Prepared& prep = p.get(state.range(0), state.range(1), state.range(2));
  const Component& component = registry().get("sparse_attention");
  const double bytes = prep.work.bytes_moved;
  time_back_to_back(state, p.stream, launches_per_sample(bytes), 1,
                    [&](int64_t) { component.gpu(prep.c, prep.inputs, prep.outputs, p.stream); });
  state.counters["bytes"] = bytes;
  state.counters["flops"] = prep.work.flops;
  state.counters["GBps"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["TFLOPs"] = benchmark::Counter(prep.work.flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["copy_ceiling_GBps"] = p.copy_ceiling_bytes_per_s * 1e-9;
}

// Prefill: one request's `tokens` rows at positions 0..tokens-1 (spec 6.1: every query token its
// own row, causal through its lengths), its keys shared by the rows.
void BM_sparse_attention_prefill(benchmark::State& state) {
  Pool& p = pool();
  Prepared& prep = p.get_prefill(state.range(0), state.range(1));
  const Component& component = registry().get("sparse_attention");
  time_back_to_back(state, p.stream, 8, 1, [&](int64_t) { component.gpu(prep.c, prep.inputs, prep.outputs, p.stream); });
  state.counters["bytes"] = prep.work.bytes_moved;
  state.counters["flops"] = prep.work.flops;
  state.counters["TFLOPs"] = benchmark::Counter(prep.work.flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
}

// The dense bf16 rate's time for a prefill's FLOPs: a GEMM of M = N = 8192 and K a multiple of 64
// that makes about those FLOPs (on random data), each sample's time scaled by their exact ratio.
void BM_dense_bf16_same_flops_attention_prefill(benchmark::State& state) {
  Pool& p = pool();
  const double flops = p.get_prefill(state.range(0), state.range(1)).work.flops;
  constexpr int64_t kSide = 8192, kLaunches = 8;
  const int64_t k = std::max<int64_t>(64, std::llround(flops / (2.0 * kSide * kSide * 64)) * 64);
  std::unique_ptr<DenseGemmFloor> gemm;
  try {
    gemm = std::make_unique<DenseGemmFloor>(kSide, kSide, k, p.stream);
  } catch (const std::runtime_error& e) {
    state.SkipWithError(e.what());
    return;
  }
  const double scale = flops / gemm->flops();
  gemm->run();
  DSV4H_HIP_CHECK(hipStreamSynchronize(p.stream));
  GpuTimer timer;
  for (auto _ : state) {
    const double s = timer.seconds(p.stream, [&] {
      for (int64_t i = 0; i < kLaunches; ++i) gemm->run();
    });
    state.SetIterationTime(s / kLaunches * scale);
  }
  state.counters["flops"] = flops;
  state.counters["gemm_k"] = static_cast<double>(k);
  state.counters["TFLOPs"] = benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
}

void time_copy_same_bytes(benchmark::State& state, CopyBy by) {
  Pool& p = pool();
  const double moved = p.get(state.range(0), state.range(1), state.range(2)).work.bytes_moved;
  time_device_copy(state, p.stream, p.copy_dst.data(), p.copy_src.data(), kCopyPoolBytes, static_cast<size_t>(moved),
                   launches_per_sample(moved), by);
  state.counters["bytes"] = moved;
  state.counters["copy_ceiling_GBps"] = p.copy_ceiling_bytes_per_s * 1e-9;
}
void BM_copy_same_bytes_attention(benchmark::State& state) { time_copy_same_bytes(state, CopyBy::kDriver); }
void BM_copy_kernel_same_bytes_attention(benchmark::State& state) { time_copy_same_bytes(state, CopyBy::kKernel); }

void BM_empty_kernel(benchmark::State& state) { time_empty_kernel(state, pool().stream, launches_per_sample(0)); }

void decode_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"bs", "ratio", "ctx"})
      ->ArgsProduct({{1, 8, 64, 128, 256}, {4, 128}, {8192, 65536}})
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Repetitions(10)
      ->Iterations(20);
}

BENCHMARK(BM_empty_kernel)->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_copy_same_bytes_attention)->Apply(decode_shapes);
BENCHMARK(BM_copy_kernel_same_bytes_attention)->Apply(decode_shapes);
BENCHMARK(BM_sparse_attention)->Apply(decode_shapes);
void prefill_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"tokens", "ratio"})
      ->ArgsProduct({{2048, 8192}, {4, 128}})
      ->UseManualTime()
      ->Unit(benchmark::kMicrosecond)
      ->Repetitions(5)
      ->Iterations(5);
}
BENCHMARK(BM_sparse_attention_prefill)->Apply(prefill_shapes);
BENCHMARK(BM_dense_bf16_same_flops_attention_prefill)->Apply(prefill_shapes);

}  // namespace
}  // namespace dsv4h

int main(int argc, char** argv) {
  return dsv4h::run_benchmarks(argc, argv, [] {
    benchmark::AddCustomContext("copy_ceiling_GBps", std::to_string(dsv4h::pool().copy_ceiling_bytes_per_s * 1e-9));
  });
}
