// Benchmarks of the filtered MoE of one expert-parallel rank (moe: kernels/moe.h's launch_moe, the
// five launches of local ids (with the rows' grouping by expert, kernels/moe_grouping.h), GEMM1,
// the filtered activation, GEMM2 and the combine; on NVIDIA the GEMMs are the tensor-core tiles of
// moe_gate_up_mma.hip and moe_down_mma.hip; Google Benchmark, manual time from GPU events).
//
// Two expert shapes, named by the benchmark's arguments:
//   tiny:  hidden 256, inter 64, 8 experts, top-2, unpartitioned (spec 1.3): every slot local;
//   flash: hidden 4096, inter 2048, 256 experts, top-6, rank 0 of 8 (DeepSeek-V4-Flash, spec 1.1):
//          32 local experts (1.6 GB of bf16 weights, beyond the 50 MB L2), about 1/8 of the slots local.
// Tokens: decode 1, 8, 64, 256 (BM_moe_decode) and prefill 4096 (BM_moe_prefill). Token m's slot s
// takes expert (97 m + 43 s) mod experts: distinct within a token, every expert equally often, and
// the same in tests/peers/moe.py, so that both time the same local rows.
//
// Counters: bytes and flops are the descriptor's work() (harness/components/moe.cpp: the used local
// experts' weights once, the tokens, the stages written and read once, the partial), kept_rows,
// GB/s and the copy ceiling measured in this process. Floors timed the same way: the empty kernel
// and two dependent loads (tiny decode is launch-bound: its ratio to the empty kernel is paired
// with its samples), and copies of the flash decode's bytes by the driver and by a copy kernel
// (the faster is what any kernel could reach). The prefill's FLOP floor, the dense bf16 matrix
// rate, comes from the peers' run (tests/peers/moe.py, floor_us).
// Without a GPU the binary says so and exits 77 (skipped).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <string>

#include "bench_support.h"
#include "harness/component.h"
#include "harness/gpu/device_tensor.h"
#include "harness/random.h"
#include "kernels/moe.h"

namespace dsv4h {
namespace {

struct Shape {
  int64_t hidden, inter, experts, topk, ranks;
};
constexpr Shape kTiny{256, 64, 8, 2, 1};
constexpr Shape kFlash{4096, 2048, 256, 6, 8};
constexpr int64_t kMaxTokens = 4096;
constexpr size_t kCopyPoolBytes = size_t{1} << 30;
constexpr double kRouteScale = 1.5, kSwigluLimit = 10;

std::string case_text(const Shape& s, int64_t tokens) {
  return "moe(tokens=" + std::to_string(tokens) + ",hidden=" + std::to_string(s.hidden) + ",inter=" +
         std::to_string(s.inter) + ",experts=" + std::to_string(s.experts) + ",topk=" + std::to_string(s.topk) +
         ",ranks=" + std::to_string(s.ranks) + ",rank=0)";
}

// The routing of the first `tokens` tokens (see the header).
HostTensor routing(const Shape& s, int64_t tokens) {
  HostTensor ids(DType::i32, {tokens, s.topk});
  for (int64_t m = 0; m < tokens; ++m)
    for (int64_t slot = 0; slot < s.topk; ++slot)
      ids.data<int32_t>()[m * s.topk + slot] = static_cast<int32_t>((97 * m + 43 * slot) % s.experts);
  return ids;
}

// `bytes` of random bf16 values of standard deviation `sd` on the device: a 32 MiB random block,
// replicated (no timing on zeros, no long host fill).
DeviceBuffer random_bf16(size_t bytes, double sd, Rng& rng) {
  DeviceBuffer d(bytes);
  HostTensor block(DType::bf16, {std::min<int64_t>(16 << 20, static_cast<int64_t>(bytes / 2))});
  fill_normal(block, rng, 0.0, sd);
  for (size_t off = 0; off < bytes; off += block.nbytes())
    DSV4H_HIP_CHECK(hipMemcpy(static_cast<char*>(d.data()) + off, block.bytes(), std::min(block.nbytes(), bytes - off),
                              hipMemcpyHostToDevice));
  return d;
}

// One shape's device data for kMaxTokens tokens: the rank's experts' weights only (the launcher
// reads no other), the workspace; fewer tokens use the first rows.
struct ShapeData {
  Shape shape;
  int64_t local_experts;
  DeviceBuffer hidden, ids, weights, gate_up_weights, down_weights, local_ids, gate_up, act, down, out;

  explicit ShapeData(const Shape& s) : shape(s), local_experts(s.experts / s.ranks) {
    Rng rng(2026);
    const int64_t rows = kMaxTokens * s.topk;
    hidden = random_bf16(kMaxTokens * s.hidden * 2, 1.0, rng);
    // Gate and up of standard deviation 6, as the descriptor's inputs: about a tenth clamped.
    gate_up_weights = random_bf16(local_experts * 2 * s.inter * s.hidden * 2, 6 / std::sqrt(double(s.hidden)), rng);
    down_weights = random_bf16(local_experts * s.hidden * s.inter * 2, 1 / std::sqrt(double(s.inter)), rng);
    const HostTensor host_ids = routing(s, kMaxTokens);
    ids = DeviceBuffer(host_ids.nbytes());
    DSV4H_HIP_CHECK(hipMemcpy(ids.data(), host_ids.bytes(), host_ids.nbytes(), hipMemcpyHostToDevice));
    HostTensor w(DType::f32, {rows});
    for (int64_t i = 0; i < rows; ++i) w.set(i, (0.1 + rng.uniform()) / s.topk);
    weights = DeviceBuffer(w.nbytes());
    DSV4H_HIP_CHECK(hipMemcpy(weights.data(), w.bytes(), w.nbytes(), hipMemcpyHostToDevice));
    local_ids = DeviceBuffer(rows * 4);
    gate_up = DeviceBuffer(rows * 2 * s.inter * 2);
    act = DeviceBuffer(rows * s.inter * 2);
    down = DeviceBuffer(rows * s.hidden * 4);
    out = DeviceBuffer(kMaxTokens * s.hidden * 4);
  }

  MoeArgs args(int64_t tokens) const {
    MoeArgs a;
    a.hidden = static_cast<const uint16_t*>(hidden.data());
    a.topk_ids = static_cast<const int32_t*>(ids.data());
    a.topk_weights = static_cast<const float*>(weights.data());
    a.gate_up_weights = static_cast<const uint16_t*>(gate_up_weights.data());
    a.down_weights = static_cast<const uint16_t*>(down_weights.data());
    a.local_ids = static_cast<int32_t*>(local_ids.data());
    a.gate_up = static_cast<uint16_t*>(gate_up.data());
    a.act = static_cast<uint16_t*>(act.data());
    a.down = static_cast<float*>(down.data());
    a.out = static_cast<float*>(out.data());
    a.tokens = tokens;
    a.hidden_size = shape.hidden;
    a.inter = shape.inter;
    a.topk = shape.topk;
    a.first_expert = 0;  // rank 0
    a.local_experts = local_experts;
    a.route_scale = static_cast<float>(kRouteScale);
    a.swiglu_limit = static_cast<float>(kSwigluLimit);
    return a;
  }
};

struct Pool {
  hipStream_t stream = nullptr;
  DeviceBuffer copy_src, copy_dst;
  double copy_ceiling_bytes_per_s = 0;
  std::map<int64_t, std::unique_ptr<ShapeData>> shapes;  // by hidden: one per Shape

  Pool() : copy_src(kCopyPoolBytes), copy_dst(kCopyPoolBytes) {
    DSV4H_HIP_CHECK(hipStreamCreate(&stream));
    copy_ceiling_bytes_per_s = measure_copy_ceiling(copy_dst.data(), copy_src.data(), kCopyPoolBytes, stream);
  }

  const ShapeData& get(const Shape& s) {
    std::unique_ptr<ShapeData>& d = shapes[s.hidden];
    if (!d) d = std::make_unique<ShapeData>(s);
    return *d;
  }
};

Pool& pool() {
  static Pool p;
  return p;
}

Shape shape_of(const benchmark::State& state) {
  return {state.range(1), state.range(2), state.range(3), state.range(4), state.range(5)};
}

// The descriptor's count of the case (its work() reads the routing only).
WorkCount work_of(const Shape& s, int64_t tokens) {
  TensorMap inputs;
  inputs.emplace("topk_ids", routing(s, tokens));
  return registry().get("moe").work(parse_case(case_text(s, tokens)), inputs);
}

// Decode: tiny's is launch-bound, so its samples are paired with empty kernels (ratio_to_empty).
// Prefill: a flash launch takes tens of ms, so one launch a sample; tiny's, eight.
void run_layer(benchmark::State& state, bool prefill) {
  Pool& p = pool();
  const Shape s = shape_of(state);
  const int64_t tokens = state.range(0);
  const bool tiny = s.hidden == kTiny.hidden;
  const ShapeData& data = p.get(s);
  const WorkCount work = work_of(s, tokens);
  const MoeArgs args = data.args(tokens);
  const int64_t launches = prefill ? (tiny ? 8 : 1) : launches_per_sample(work.bytes_moved);
  time_back_to_back(state, p.stream, launches, 1, [&](int64_t) { launch_moe(args, p.stream); }, !prefill && tiny);
  const HostTensor ids = routing(s, tokens);
  int64_t kept = 0;
  for (int64_t i = 0; i < ids.numel(); ++i) kept += ids.data<int32_t>()[i] < data.local_experts;
  state.counters["kept_rows"] = static_cast<double>(kept);
  state.counters["bytes"] = work.bytes_moved;
  state.counters["flops"] = work.flops;
  state.counters["GBps"] = benchmark::Counter(work.bytes_moved * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["TFLOPps"] = benchmark::Counter(work.flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["copy_ceiling_GBps"] = p.copy_ceiling_bytes_per_s * 1e-9;
}
void BM_moe_decode(benchmark::State& state) { run_layer(state, false); }
void BM_moe_prefill(benchmark::State& state) { run_layer(state, true); }

void BM_empty_kernel(benchmark::State& state) { time_empty_kernel(state, pool().stream, launches_per_sample(0)); }

void BM_dependent_loads(benchmark::State& state) {
  time_dependent_loads(state, pool().stream, launches_per_sample(0), static_cast<int>(state.range(0)));
}

// Copies moving the flash decode's counted bytes, by the driver or by a copy kernel.
void time_copy_same_bytes(benchmark::State& state, CopyBy by) {
  Pool& p = pool();
  const double moved = work_of(shape_of(state), state.range(0)).bytes_moved;
  time_device_copy(state, p.stream, p.copy_dst.data(), p.copy_src.data(), kCopyPoolBytes, static_cast<size_t>(moved),
                   launches_per_sample(moved), by);
  state.counters["copy_ceiling_GBps"] = p.copy_ceiling_bytes_per_s * 1e-9;
}
void BM_copy_same_bytes_moe(benchmark::State& state) { time_copy_same_bytes(state, CopyBy::kDriver); }
void BM_copy_kernel_same_bytes_moe(benchmark::State& state) { time_copy_same_bytes(state, CopyBy::kKernel); }

void with_shapes(benchmark::internal::Benchmark* b, std::initializer_list<Shape> shapes,
                 std::initializer_list<int64_t> tokens) {
  b->ArgNames({"tokens", "hidden", "inter", "experts", "topk", "ranks"});
  for (const Shape& s : shapes)
    for (int64_t t : tokens) b->Args({t, s.hidden, s.inter, s.experts, s.topk, s.ranks});
  b->UseManualTime()->Unit(benchmark::kMicrosecond);
}
void decode(benchmark::internal::Benchmark* b) { with_shapes(b, {kTiny, kFlash}, {1, 8, 64, 256}); }
void flash_decode(benchmark::internal::Benchmark* b) { with_shapes(b, {kFlash}, {1, 8, 64, 256}); }
void prefill(benchmark::internal::Benchmark* b) { with_shapes(b, {kTiny, kFlash}, {kMaxTokens}); }

BENCHMARK(BM_empty_kernel)->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_dependent_loads)->ArgName("depth")->Arg(2)->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_copy_same_bytes_moe)->Apply(flash_decode)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_copy_kernel_same_bytes_moe)->Apply(flash_decode)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_moe_decode)->Apply(decode)->Repetitions(10)->Iterations(20);
BENCHMARK(BM_moe_prefill)->Apply(prefill)->Repetitions(3)->Iterations(3);

}  // namespace
}  // namespace dsv4h

int main(int argc, char** argv) {
  return dsv4h::run_benchmarks(argc, argv, [] {
    benchmark::AddCustomContext("copy_ceiling_GBps", std::to_string(dsv4h::pool().copy_ceiling_bytes_per_s * 1e-9));
  });
}
