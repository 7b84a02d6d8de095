// Benchmarks of the compressor step (issue 29; Google Benchmark, manual time from GPU events).
//
// Prefill: one request of T in {8192, 65536} tokens from position 0, ratio 4 and 128, d 512 (the
// main latent: 8 KB (C4) or 4 KB (C128) of fp32 kv and score a token). Each sample launches the
// step K times back to back over rotating windows of a 1 GiB input pool, so that a 64 MB (8K
// tokens) step does not find its inputs in the 50 MB L2. Floors: copies moving the same bytes, by
// the driver and by a copy kernel (the faster is the floor the goal compares with).
// Decode: bs in {1, 8, 64, 256} requests of one token each, at random positions (below 2^16) that
// complete a block (emit:1, the step that reads the block from the ring and packs) or not (emit:0,
// the ring row only); floors: the empty kernel, dependent loads (a decode step's chain: the
// request's start, then its rows) and one copy kernel moving the step's bytes.
// Counters: bytes moved (the descriptor's work count: inputs read once, the state rows read, the ring
// rows and entries written), GB/s, the copy ceiling measured in this process, FLOPs.
// Without a GPU the binary says so and exits 77 (skipped).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "bench_support.h"
#include "harness/component.h"
#include "harness/gpu/device_tensor.h"
#include "harness/random.h"
#include "kernels/compressor.h"

namespace dsv4h {
namespace {

constexpr int64_t kDims = 512;
constexpr size_t kInputPoolBytes = size_t{1} << 30;
constexpr int64_t kMaxBatch = 256;

int64_t width_of(int64_t ratio) { return (ratio == 4 ? 2 : 1) * kDims; }

// Device data shared by every benchmark: 1 GiB of random fp32 (kv and score windows are cut from
// it), the ape and norm weight, rings for the largest batch, the pool and the copy ceiling.
struct Pool {
  hipStream_t stream = nullptr;
  DeviceBuffer inputs, ape, norm_weight, ring, ring_out, pool, copy_dst;
  double copy_ceiling_bytes_per_s = 0;

  Pool()
      : inputs(kInputPoolBytes), ape(128 * 1024 * 4), norm_weight(kDims * 4),
        ring((kMaxBatch + 1) * 128 * 1024 * 4), ring_out((kMaxBatch + 1) * 128 * 1024 * 4),
        pool(size_t{40} << 20), copy_dst(kInputPoolBytes / 2) {
    DSV4H_HIP_CHECK(hipStreamCreate(&stream));
    HostTensor block(DType::f32, {16 << 20});
    Rng rng(2029);
    fill_normal(block, rng, 0.0, 1.5);
    for (size_t off = 0; off < inputs.bytes(); off += block.nbytes())
      DSV4H_HIP_CHECK(hipMemcpy(static_cast<char*>(inputs.data()) + off, block.bytes(),
                                std::min(block.nbytes(), inputs.bytes() - off), hipMemcpyHostToDevice));
    for (DeviceBuffer* b : {&ape, &norm_weight, &ring})
      for (size_t off = 0; off < b->bytes(); off += block.nbytes())
        DSV4H_HIP_CHECK(hipMemcpy(static_cast<char*>(b->data()) + off, block.bytes(),
                                  std::min(block.nbytes(), b->bytes() - off), hipMemcpyHostToDevice));
    copy_ceiling_bytes_per_s = measure_copy_ceiling(copy_dst.data(), inputs.data(), copy_dst.bytes(), stream);
  }
};

Pool& pool() {
  static Pool p;
  return p;
}

DeviceBuffer upload_i32(const std::vector<int32_t>& v) {
  DeviceBuffer d(v.size() * 4);
  DSV4H_HIP_CHECK(hipMemcpy(d.data(), v.data(), v.size() * 4, hipMemcpyHostToDevice));
  return d;
}

// One step's per-request and per-token tensors, on the device.
struct Step {
  DeviceBuffer start, extend_len, ring_index, out_loc;
};

Step make_step(int64_t ratio, int64_t batch, int64_t tokens, const std::vector<int32_t>& starts) {
  std::vector<int32_t> len(batch, static_cast<int32_t>(tokens)), ring_index(batch), out_loc(batch * tokens, 0);
  Step s;
  int32_t slot = 1;
  for (int64_t b = 0; b < batch; ++b) {
    ring_index[b] = static_cast<int32_t>(b + 1);
    for (int64_t i = 0; i < tokens; ++i)
      if ((starts[b] + i + 1) % ratio == 0) out_loc[b * tokens + i] = slot++;
  }
  s.start = upload_i32(starts);
  s.extend_len = upload_i32(len);
  s.ring_index = upload_i32(ring_index);
  s.out_loc = upload_i32(out_loc);
  return s;
}

CompressorArgs args_for(const Pool& p, const Step& s, int64_t ratio, int64_t batch, int64_t tokens, size_t input_offset) {
  const int64_t rows = batch * tokens;
  CompressorArgs a;
  a.kv = reinterpret_cast<const float*>(static_cast<const char*>(p.inputs.data()) + input_offset);
  a.score = a.kv + rows * width_of(ratio);
  a.ape = static_cast<const float*>(p.ape.data());
  a.norm_weight = static_cast<const float*>(p.norm_weight.data());
  a.ring = static_cast<const float*>(p.ring.data());
  a.start = static_cast<const int32_t*>(s.start.data());
  a.extend_len = static_cast<const int32_t*>(s.extend_len.data());
  a.ring_index = static_cast<const int32_t*>(s.ring_index.data());
  a.out_loc = static_cast<const int32_t*>(s.out_loc.data());
  a.pool = static_cast<uint8_t*>(p.pool.data());
  a.ring_out = static_cast<float*>(p.ring_out.data());
  a.ratio = ratio;
  a.dims = kDims;
  a.batch = batch;
  a.tokens = tokens;
  const CompressorPoolPages pages = compressor_pool_pages(ratio, kDims);
  a.pool_slots = static_cast<int64_t>(p.pool.bytes()) / pages.bytes * pages.entries;
  return a;
}

// The descriptor's work count for these steps (harness/components/compressor.cpp, work(): it reads
// the requests' starts and lengths only).
WorkCount step_work(int64_t ratio, int64_t batch, int64_t tokens, const std::vector<int32_t>& starts) {
  HostTensor start(DType::i32, {batch}), extend_len(DType::i32, {batch});
  for (int64_t b = 0; b < batch; ++b) {
    start.data<int32_t>()[b] = starts[b];
    extend_len.data<int32_t>()[b] = static_cast<int32_t>(tokens);
  }
  TensorMap inputs;
  inputs.emplace("start", std::move(start));
  inputs.emplace("extend_len", std::move(extend_len));
  return registry().get("compressor").work(
      parse_case("compressor(ratio=" + std::to_string(ratio) + ",dims=" + std::to_string(kDims) + ",batch=" +
                 std::to_string(batch) + ",tokens=" + std::to_string(tokens) + ")"),
      inputs);
}

void run_step(benchmark::State& state, int64_t ratio, int64_t batch, int64_t tokens, const std::vector<int32_t>& starts,
              bool paired_with_empty) {
  Pool& p = pool();
  const Step s = make_step(ratio, batch, tokens, starts);
  const WorkCount work = step_work(ratio, batch, tokens, starts);
  const double bytes = work.bytes_moved;
  const size_t input_bytes = static_cast<size_t>(2 * batch * tokens * width_of(ratio) * 4);
  const int64_t sets = std::clamp<int64_t>(static_cast<int64_t>(kInputPoolBytes / input_bytes), 1, 16);
  time_back_to_back(state, p.stream, launches_per_sample(bytes), sets, [&](int64_t set) {
    launch_compressor(args_for(p, s, ratio, batch, tokens, static_cast<size_t>(set) * input_bytes), p.stream);
  }, paired_with_empty);
  state.counters["bytes"] = bytes;
  state.counters["flops"] = work.flops;
  state.counters["GBps"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["copy_ceiling_GBps"] = p.copy_ceiling_bytes_per_s * 1e-9;
}

void BM_compressor_prefill(benchmark::State& state) {
  run_step(state, state.range(0), 1, state.range(2), {0}, false);
}

// A decode step's positions: bs requests at random positions that complete a block or not.
std::vector<int32_t> decode_starts(int64_t ratio, int64_t batch, bool emit) {
  Rng rng(7);
  std::vector<int32_t> starts(batch);
  // A token at p completes a block when p % ratio == ratio - 1.
  for (int32_t& s : starts)
    s = static_cast<int32_t>(rng.integer(1, 500) * ratio + (emit ? ratio - 1 : rng.integer(0, ratio - 2)));
  return starts;
}

void BM_compressor_decode(benchmark::State& state) {
  const int64_t ratio = state.range(0), batch = state.range(2);
  run_step(state, ratio, batch, 1, decode_starts(ratio, batch, state.range(3) != 0), true);
}

void BM_empty_kernel(benchmark::State& state) { time_empty_kernel(state, pool().stream, launches_per_sample(0)); }

void BM_dependent_loads(benchmark::State& state) {
  time_dependent_loads(state, pool().stream, launches_per_sample(0), static_cast<int>(state.range(0)));
}

// Copies moving a prefill's bytes (inputs read, entries and ring rows written), by the driver or by
// a copy kernel.
void time_copy_same_bytes(benchmark::State& state, CopyBy by) {
  Pool& p = pool();
  const int64_t ratio = state.range(0), tokens = state.range(2);
  const double moved = step_work(ratio, 1, tokens, {0}).bytes_moved;
  time_device_copy(state, p.stream, p.copy_dst.data(), p.inputs.data(), p.copy_dst.bytes(), static_cast<size_t>(moved),
                   launches_per_sample(moved), by);
  state.counters["copy_ceiling_GBps"] = p.copy_ceiling_bytes_per_s * 1e-9;
}
void BM_copy_same_bytes(benchmark::State& state) { time_copy_same_bytes(state, CopyBy::kDriver); }
void BM_copy_kernel_same_bytes(benchmark::State& state) { time_copy_same_bytes(state, CopyBy::kKernel); }

// One copy kernel moving a decode step's bytes: with the dependent loads, its floor. An emitting
// C128 step reads its requests' 128 ring rows (bs 256: 135 MB), which no chain of loads bounds.
void BM_copy_kernel_same_bytes_decode(benchmark::State& state) {
  Pool& p = pool();
  const int64_t ratio = state.range(0), batch = state.range(2);
  const double moved = step_work(ratio, batch, 1, decode_starts(ratio, batch, state.range(3) != 0)).bytes_moved;
  time_device_copy(state, p.stream, p.copy_dst.data(), p.inputs.data(), p.copy_dst.bytes(), static_cast<size_t>(moved),
                   launches_per_sample(moved), CopyBy::kKernel);
  state.counters["bytes"] = moved;
  state.counters["copy_ceiling_GBps"] = p.copy_ceiling_bytes_per_s * 1e-9;
}

BENCHMARK(BM_empty_kernel)->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_dependent_loads)->ArgName("depth")->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_copy_same_bytes)
    ->ArgNames({"ratio", "dims", "tokens"})
    ->ArgsProduct({{4, 128}, {kDims}, {8192, 65536}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_copy_kernel_same_bytes)
    ->ArgNames({"ratio", "dims", "tokens"})
    ->ArgsProduct({{4, 128}, {kDims}, {8192, 65536}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_compressor_prefill)
    ->ArgNames({"ratio", "dims", "tokens"})
    ->ArgsProduct({{4, 128}, {kDims}, {8192, 65536}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_copy_kernel_same_bytes_decode)
    ->ArgNames({"ratio", "dims", "bs", "emit"})
    ->ArgsProduct({{4, 128}, {kDims}, {1, 8, 64, 256}, {0, 1}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_compressor_decode)
    ->ArgNames({"ratio", "dims", "bs", "emit"})
    ->ArgsProduct({{4, 128}, {kDims}, {1, 8, 64, 256}, {0, 1}})
    ->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);

}  // namespace
}  // namespace dsv4h

int main(int argc, char** argv) {
  return dsv4h::run_benchmarks(argc, argv, [] {
    benchmark::AddCustomContext("copy_ceiling_GBps", std::to_string(dsv4h::pool().copy_ceiling_bytes_per_s * 1e-9));
  });
}
