// Benchmarks of the model (issue 31) through the GPU forward's own launch sequences
// (model/gpu/step_bench.h: nothing reported, read back or synchronised inside a step).
//
// - BM_model_decode_{eager,replay}/bs:{1,8,64}: the tiny model (model/configs/tiny.json, seeded
//   host weights), 64 requests at context kContext (4096: past the window, 32 C128 entries, 1024
//   C4 entries against index_topk 512), one decode step of the first bs requests. Both are timed
//   as the device sees them with the host feeding it: events around kSteps steps, no hold. Eager
//   is the host launching every kernel (and cuBLAS's host work) one after another, which is what a
//   graph removes; a replay is one launch, so its time is the graph's own. (Nor could a hold queue
//   kSteps eager steps: thousands of launches, more than a stream's launch queue takes while held.)
//   The replay's counters: graph_nodes and kernel_nodes of the bucket's graph; kernels_us, the
//   sum of its nodes' device times, each node timed alone (the graph cloned with every other node
//   removed but a kernel's memset predecessors, launched back to back behind a hold, as every
//   kernel of bench_support is timed); and
//   overhead_us_per_node = (the replay's time - kernels_us) / graph_nodes, which the goal "a
//   replayed step within the sum of its kernels' device times + 1 us per kernel" bounds by 1.
// - BM_model_prefill/tokens:{1024,8192}: one request's prefill through the per-request forward
//   (GpuForward::run's first call, nothing reported), timed between events with the host driving
//   it: the call allocates per op, makes indices on the host and synchronises, so no hold can
//   queue it, and that host work is part of the path's cost. The tiny config bounds no prompt
//   below 65536 tokens (its window and index_topk bound what a token attends to, not the prompt;
//   a request's pools are sized by its tokens), so 8K runs as it is.
// - BM_model_flash_layer_decode/bs:{1,64}: one decoder layer at DeepSeek-V4-Flash's shapes (spec
//   1.1: flash.json with one layer of compress ratio 4 and no hash routing, i.e. a C4 layer with
//   its compressors, indexer, sparse attention, 256-expert MoE and the shared expert, in mHC),
//   weights made on the device (13 GB of experts), 64 requests at kContext, the layer's step
//   replayed from its graph and timed as above. Its floors: each op's bytes at the copy ceiling or
//   its FLOPs at the dense bf16 matrix rate, whichever takes longer, summed over the layer's ops
//   (flash_layer_work; the routed experts' weights counted for the distinct experts the step
//   routed to), both rates measured in this process (the 1 GiB device-to-device copy; cuBLAS's
//   8192^3 bf16 GEMM, none on AMD: bytes only there). Counters floor_us, ratio_to_floors (the goal:
//   <= 1.5), experts_used, bytes, flops; the per-op floors are printed once a batch size.
// A stage that makes no progress for kStallSeconds ends the run, exit 3, naming the stage (and the
// node, where one timed alone never finishes). Without a GPU the binary says so and exits 77 (skipped).
#include <benchmark/benchmark.h>
#include <cxxabi.h>
#if defined(DSV4H_GPU_NVIDIA)
#include <cuda.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "bench_support.h"
#include "harness/case_file.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/gpu/gpu_forward.h"
#include "model/gpu/step_bench.h"
#include "model/weights.h"
#include "tests/bench/floors/dense_gemm_floor.h"

namespace dsv4h {
namespace {

using model::gpu::StepBench;

constexpr int64_t kContext = 4096;
constexpr int64_t kMaxRows = 64;
constexpr int64_t kSteps = 8;  // steps a timing sample
constexpr uint64_t kSeed = 2026;
constexpr size_t kCopyPoolBytes = size_t{1} << 30;

// A stalled run says where it stalled: a kernel that never finishes would otherwise hold the
// process until its caller's timeout, which names nothing. Each stage notes what it is doing
// (watchdog_note); kStallSeconds without a new note ends the process, exit 3, naming the last.
constexpr int kStallSeconds = 180;  // a stage here takes seconds; the Flash layer's setup the longest

struct Watchdog {
  std::mutex mutex;
  std::string doing = "starting";
  std::chrono::steady_clock::time_point since = std::chrono::steady_clock::now();
};
Watchdog& watchdog() {
  static Watchdog w;
  return w;
}

void watchdog_note(const std::string& doing) {
  Watchdog& w = watchdog();
  const std::lock_guard<std::mutex> lock(w.mutex);
  w.doing = doing;
  w.since = std::chrono::steady_clock::now();
}

void start_watchdog() {
  std::thread([] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      Watchdog& w = watchdog();
      const std::lock_guard<std::mutex> lock(w.mutex);
      if (std::chrono::steady_clock::now() - w.since > std::chrono::seconds(kStallSeconds)) {
        std::fprintf(stderr, "bench_model: no progress for %d s, stopped (exit 3) in: %s\n", kStallSeconds, w.doing.c_str());
        std::fflush(stdout);
        std::_Exit(3);
      }
    }
  }).detach();
}

std::string config_path(const std::string& name) { return fixtures_dir() + "/../model/configs/" + name + ".json"; }

// Flash's layer shapes as a one-layer model: a C4 layer (flash.json's layers 2, 4, ... past the
// hash-routed first three), and the MTP layer the config format requires (never run here).
model::ModelConfig flash_one_layer() {
  model::ModelConfig c = model::load_config(config_path("flash"));
  c.n_layers = 1;
  c.compress_ratios = {4, 0};
  c.n_hash_layers = 0;
  return model::parse_config(model::config_to_json(c), "flash.json as one C4 layer");
}

// Device seconds per step of `steps` steps fed by the host, between two events (no hold).
template <typename Step>
void time_host_fed(benchmark::State& state, hipStream_t stream, Step&& step, std::vector<double>* samples = nullptr) {
  step();  // warm-up
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream));
  GpuTimer timer;
  for (auto _ : state) {
    const double s = timer.seconds_host_fed(stream, [&] {
      for (int64_t i = 0; i < kSteps; ++i) step();
    }) / kSteps;
    state.SetIterationTime(s);
    if (samples) samples->push_back(s);
  }
  state.counters["steps_per_sample"] = kSteps;
}

// A captured step's nodes, each timed alone: the graph cloned with every other node removed (but
// its memset predecessors, memset_dependencies), launched back to back behind a hold (16 a sample,
// the median of 3 samples). A node alone reads what the step's earlier nodes left (every op writes
// a buffer of its own, decode_graph.h) and writes what it always writes, so it does the step's
// work; no node of the step accumulates into its output (one simulated rank: no partial sums).
struct GraphNodes {
  int64_t nodes = 0, kernels = 0;
  double seconds = 0;  // the sum of the nodes' device times
};

#if defined(DSV4H_GPU_NVIDIA)
// A driver function by name, through the runtime (no link to libcuda); null where the driver lacks it.
template <typename F>
F driver_function(const char* symbol) {
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaGetDriverEntryPointByVersion(symbol, &entry, 12030, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess)
    entry = nullptr;
  (void)cudaGetLastError();
  return reinterpret_cast<F>(entry);
}

// The name of a kernel node's function as the driver knows it: cuBLAS's kernels come from its own
// modules (a CUfunction or a CUkernel), whose names the runtime's cudaFuncGetName cannot tell.
const char* driver_kernel_name(hipGraphNode_t node) {
  static const auto get_params =
      driver_function<CUresult (*)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS*)>("cuGraphKernelNodeGetParams");
  static const auto func_name = driver_function<CUresult (*)(const char**, CUfunction)>("cuFuncGetName");
  static const auto kernel_name = driver_function<CUresult (*)(const char**, CUkernel)>("cuKernelGetName");
  CUDA_KERNEL_NODE_PARAMS params{};
  const char* name = nullptr;
  if (!get_params || get_params(node, &params) != CUDA_SUCCESS) return nullptr;
  if (params.func && func_name && func_name(&name, params.func) == CUDA_SUCCESS) return name;
  if (params.kern && kernel_name && kernel_name(&name, params.kern) == CUDA_SUCCESS) return name;
  return nullptr;
}
#endif

// A kernel node's function name where the runtime or the driver can tell it (NVIDIA: ours and
// cuBLAS's), else its node type: what the printed slowest nodes of a step are.
std::string node_name(hipGraphNode_t node, hipGraphNodeType type) {
#if defined(DSV4H_GPU_NVIDIA)
  cudaKernelNodeParams params{};
  const char* name = nullptr;
  if (type == cudaGraphNodeTypeKernel && cudaGraphKernelNodeGetParams(node, &params) == cudaSuccess &&
      cudaFuncGetName(&name, params.func) == cudaSuccess && name)
    return name;
  (void)cudaGetLastError();
  if (type == cudaGraphNodeTypeKernel && (name = driver_kernel_name(node)) != nullptr) return name;
#else
  (void)node;
#endif
  return "(node type " + std::to_string(static_cast<int>(type)) + ")";
}

// A kernel's name demangled, without anonymous namespaces or its parameter list
// ("dsv4h::mhc_pre_kernel" for _ZN5dsv4h44_GLOBAL__N_..14mhc_pre_kernelENS_10MhcPreArgsE), else as given.
std::string readable(const std::string& name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status), std::free);
  std::string out = status == 0 && demangled ? demangled.get() : name;
  const std::string anonymous = "(anonymous namespace)::";
  for (size_t at; (at = out.find(anonymous)) != std::string::npos;) out.erase(at, anonymous.size());
  if (out.rfind("void ", 0) == 0) out.erase(0, 5);  // a template's return type
  int depth = 0;  // the parameter list: the first '(' outside template arguments, past the name
  for (size_t i = 1; i < out.size(); ++i) {
    depth += out[i] == '<' ? 1 : out[i] == '>' ? -1 : 0;
    if (out[i] == '(' && depth == 0) return out.substr(0, i);
  }
  return out;
}

// Where a step's time goes (stdout only): its nodes, each timed alone, summed by kernel (nodes,
// time, share of the nodes' sum), then the slowest nodes.
void print_slowest(const char* what, std::vector<std::pair<double, std::string>> times) {
  std::map<std::string, std::pair<int, double>> by_kernel;
  double total = 0;
  for (const auto& [seconds, name] : times) {
    auto& k = by_kernel[readable(name)];
    ++k.first, k.second += seconds, total += seconds;
  }
  std::vector<std::pair<std::string, std::pair<int, double>>> kernels(by_kernel.begin(), by_kernel.end());
  std::sort(kernels.begin(), kernels.end(), [](const auto& a, const auto& b) { return a.second.second > b.second.second; });
  std::printf("%s: its %zu nodes, each timed alone, %.1f us in all; by kernel (nodes, us, share):\n", what, times.size(),
              total * 1e6);
  for (const auto& [name, k] : kernels)
    std::printf("  %4d %9.2f us %5.1f%%  %s\n", k.first, k.second * 1e6, total > 0 ? 100 * k.second / total : 0.0, name.c_str());
  std::sort(times.begin(), times.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::printf("%s: its slowest nodes:\n", what);
  for (size_t i = 0; i < std::min<size_t>(times.size(), 12); ++i)
    std::printf("  %8.2f us  %s\n", times[i].first * 1e6, readable(times[i].second).c_str());
}

// Spelled here, not in kernels/portability.h: host graph calls of this benchmark alone, and a change
// there marks every component's kernels as changed since their GPU runs (report status).
#if defined(DSV4H_GPU_NVIDIA)
constexpr hipGraphNodeType kMemsetNode = cudaGraphNodeTypeMemset;
#else
constexpr hipGraphNodeType kMemsetNode = hipGraphNodeTypeMemset;
#endif

// A node's memset predecessors, which run with it when it is timed alone: a GEMM of cuBLAS that
// splits its K dimension may zero its workspace's counters in a memset node before its kernel,
// whose blocks then wait on those counters; alone, the kernel would find them as its last run left
// them and wait forever.
std::vector<hipGraphNode_t> memset_dependencies(hipGraphNode_t node) {
  size_t count = 0;
#if defined(DSV4H_GPU_NVIDIA)
  // With the edges' data: the step captured at bs 8 has edges that carry some (H100, 2026-12-07), and
  // a query without it fails there as lossy (cudaErrorLossyQuery).
  DSV4H_HIP_CHECK(cudaGraphNodeGetDependencies(node, nullptr, nullptr, &count));
  std::vector<hipGraphNode_t> deps(count);
  std::vector<cudaGraphEdgeData> edges(count);
  DSV4H_HIP_CHECK(cudaGraphNodeGetDependencies(node, deps.data(), edges.data(), &count));
#else
  DSV4H_HIP_CHECK(hipGraphNodeGetDependencies(node, nullptr, &count));
  std::vector<hipGraphNode_t> deps(count);
  DSV4H_HIP_CHECK(hipGraphNodeGetDependencies(node, deps.data(), &count));
#endif
  std::vector<hipGraphNode_t> memsets;
  for (hipGraphNode_t d : deps) {
    hipGraphNodeType type;
    DSV4H_HIP_CHECK(hipGraphNodeGetType(d, &type));
    if (type == kMemsetNode) memsets.push_back(d);
  }
  return memsets;
}

GraphNodes time_graph_nodes(const std::string& what, hipGraph_t graph, hipStream_t stream) {
  size_t count = 0;
  DSV4H_HIP_CHECK(hipGraphGetNodes(graph, nullptr, &count));
  std::vector<hipGraphNode_t> nodes(count);
  DSV4H_HIP_CHECK(hipGraphGetNodes(graph, nodes.data(), &count));
  // A memset that precedes a kernel is timed with it (memset_dependencies), not again alone.
  std::vector<hipGraphNodeType> types(count);
  std::map<hipGraphNode_t, std::vector<hipGraphNode_t>> with;
  std::set<hipGraphNode_t> attached;
  for (size_t at = 0; at < count; ++at) {
    DSV4H_HIP_CHECK(hipGraphNodeGetType(nodes[at], &types[at]));
    if (types[at] != hipGraphNodeTypeKernel) continue;
    with[nodes[at]] = memset_dependencies(nodes[at]);
    attached.insert(with[nodes[at]].begin(), with[nodes[at]].end());
  }
  GraphNodes out;
  out.nodes = static_cast<int64_t>(count);
  GpuTimer timer;
  std::vector<std::pair<double, std::string>> times;
  for (size_t at = 0; at < count; ++at) {
    const hipGraphNode_t node = nodes[at];
    const hipGraphNodeType type = types[at];
    out.kernels += type == hipGraphNodeTypeKernel;
    if (attached.count(node)) continue;
    const std::string name = node_name(node, type);
    watchdog_note(what + ": node " + std::to_string(at + 1) + " of " + std::to_string(count) + " (" + readable(name) +
                  ") timed alone");
    hipGraph_t alone = nullptr;
    DSV4H_HIP_CHECK(hipGraphClone(&alone, graph));
    std::set<hipGraphNode_t> kept;
    for (hipGraphNode_t original : with[node]) {
      hipGraphNode_t clone = nullptr;
      DSV4H_HIP_CHECK(hipGraphNodeFindInClone(&clone, original, alone));
      kept.insert(clone);
    }
    hipGraphNode_t mine = nullptr;
    DSV4H_HIP_CHECK(hipGraphNodeFindInClone(&mine, node, alone));
    kept.insert(mine);
    std::vector<hipGraphNode_t> others(count);
    size_t n = count;
    DSV4H_HIP_CHECK(hipGraphGetNodes(alone, others.data(), &n));
    for (size_t i = 0; i < n; ++i)
      if (!kept.count(others[i])) DSV4H_HIP_CHECK(hipGraphDestroyNode(others[i]));
    hipGraphExec_t exec = nullptr;
    DSV4H_HIP_CHECK(hipGraphInstantiate(&exec, alone, nullptr, nullptr, 0));
    DSV4H_HIP_CHECK(hipGraphLaunch(exec, stream));  // its first launch uploads it: not behind the hold
    DSV4H_HIP_CHECK(hipStreamSynchronize(stream));
    std::vector<double> samples;
    for (int s = 0; s < 3; ++s)
      samples.push_back(timer.seconds(stream, [&] {
        for (int i = 0; i < 16; ++i) DSV4H_HIP_CHECK(hipGraphLaunch(exec, stream));
      }) / 16);
    std::nth_element(samples.begin(), samples.begin() + 1, samples.end());
    out.seconds += samples[1];
    times.emplace_back(samples[1], name);
    DSV4H_HIP_CHECK(hipGraphExecDestroy(exec));
    DSV4H_HIP_CHECK(hipGraphDestroy(alone));
  }
  print_slowest(what.c_str(), std::move(times));
  return out;
}

// One op of the Flash layer's decode: the bytes it must move (weights once, activations in and
// out, the pools' entries it reads) and its FLOPs.
struct OpWork {
  const char* op;
  double bytes, flops;
};

std::vector<OpWork> flash_layer_work(const model::ModelConfig& c, int64_t rows, int64_t experts_used) {
  const double B = static_cast<double>(rows), dim = c.dim, hc = c.hc_mult, mix = c.hc_mix(), H = c.n_heads, hd = c.head_dim;
  const double q = c.q_lora_rank, G = c.o_groups, r = c.o_lora_rank, E = c.n_routed_experts, I = c.moe_inter_dim;
  const double k = c.n_activated_experts, nI = c.index_n_heads, id = c.index_head_dim;
  const double c4 = static_cast<double>((kContext + 1) / 4), topk = std::min<double>(static_cast<double>(c.index_topk), c4);
  const double window = static_cast<double>(c.window_size), entry = 584, index_entry = 132;  // MODEL1, indexer bytes
  // y [B, out] = x [B, in] W^T: weights of `w` bytes, x of `xb`, y of `yb` bytes an element.
  const auto gemm = [&](const char* op, double out, double in, double w = 2, double xb = 2, double yb = 2) {
    return OpWork{op, out * in * w + B * in * xb + B * out * yb, 2 * B * out * in};
  };
  const OpWork mhc_pre{"hc.pre", mix * hc * dim * 4 + B * hc * dim * 2 + B * dim * 2, 2 * B * mix * hc * dim};
  const OpWork mhc_post{"hc.post", B * dim * 2 + 2 * B * hc * dim * 2, 2 * B * hc * hc * dim};
  const OpWork norm{"norm", 2 * B * dim * 2 + dim * 4, 0};
  return {
      mhc_pre,
      norm,
      gemm("attn.wq_a", q, dim),
      gemm("attn.wq_b", H * hd, q),
      {"attn.q_rope", 2 * B * H * hd * 2, 0},
      gemm("attn.wkv", hd, dim),
      {"attn.kv_cache", 2 * B * hd * 2 + 2 * B * entry, 0},
      gemm("attn.compressor", 2 * 2 * hd, dim, 4, 4, 4),  // wkv and wgate, fp32
      gemm("attn.indexer.compressor", 2 * 2 * id, dim, 4, 4, 4),
      gemm("attn.indexer.wq_b", nI * id, q),
      gemm("attn.indexer.weights", nI, dim, 2, 2, 4),
      {"attn.index_select", B * (c4 * index_entry + nI * id + 2 * c4 * 4), 2 * B * nI * id * c4},
      {"attn.attend", B * ((window + topk) * entry + 2 * H * hd * 2), 2 * 2 * B * H * hd * (window + topk)},
      {"attn.wo_a", r * H * hd * 2 + B * H * hd * 2 + B * G * r * 2, 2 * B * r * H * hd},
      gemm("attn.wo_b", dim, G * r),
      mhc_post,
      mhc_pre,
      norm,
      gemm("ffn.gate", E, dim, 2, 2, 4),
      {"ffn.experts", static_cast<double>(experts_used) * 3 * I * dim * 2 + B * dim * 2 + B * dim * 4, 2 * B * k * 3 * I * dim},
      {"ffn.shared", 3 * I * dim * 2 + B * dim * 2 + B * dim * 4, 2 * B * 3 * I * dim},
      mhc_post,
  };
}

// The matrix rate cuBLAS reaches on a dense 8192^3 bf16 product (the median of 5); 0 where no
// BLAS can be loaded (AMD), with the reason printed.
double measure_matrix_rate(hipStream_t stream) {
  try {
    DenseGemmFloor gemm(8192, 8192, 8192, stream);
    gemm.run();
    DSV4H_HIP_CHECK(hipStreamSynchronize(stream));
    GpuTimer timer;
    std::vector<double> rates;
    for (int i = 0; i < 5; ++i) rates.push_back(gemm.flops() / timer.seconds(stream, [&] { gemm.run(); }));
    std::nth_element(rates.begin(), rates.begin() + 2, rates.end());
    std::printf("dense bf16 matrix rate measured here: %.1f TFLOP/s\n", rates[2] * 1e-12);
    return rates[2];
  } catch (const std::runtime_error& e) {
    std::printf("no dense matrix rate (the Flash layer's floors count bytes only): %s\n", e.what());
    return 0;
  }
}

struct Pool {
  std::unique_ptr<model::ReferenceModel> tiny_model;
  std::unique_ptr<StepBench> tiny, flash;
  model::ModelConfig flash_config;
  double copy_ceiling = 0, matrix_rate = 0;
  std::map<int64_t, GraphNodes> tiny_nodes, flash_nodes;  // by rows

  StepBench& get_tiny() {
    if (!tiny) {
      watchdog_note("the tiny model's weights and its batch's prefill");
      const model::ModelConfig c = model::load_config(config_path("tiny"));
      tiny_model = std::make_unique<model::ReferenceModel>(c, model::make_weights(c, kSeed), model::gpu_forward_reference_options());
      tiny = StepBench::whole_model(*tiny_model);
      tiny->prefill_batch(kMaxRows, kContext, kSeed);
    }
    return *tiny;
  }

  StepBench& get_flash() {
    if (!flash) {
      watchdog_note("the Flash layer's weights (13 GB)");
      flash_config = flash_one_layer();
      flash = StepBench::one_layer(flash_config, kSeed);
      watchdog_note("the Flash layer's batch's prefill");
      flash->prefill_batch(kMaxRows, kContext, kSeed);
      watchdog_note("the copy ceiling and the matrix rate");
      DeviceBuffer src(kCopyPoolBytes), dst(kCopyPoolBytes);
      copy_ceiling = measure_copy_ceiling(dst.data(), src.data(), kCopyPoolBytes, flash->stream());
      matrix_rate = measure_matrix_rate(flash->stream());
    }
    return *flash;
  }
};

Pool& pool() {
  static Pool p;
  return p;
}

// The counters of a replayed step against its nodes timed alone (see the header).
void report_nodes(benchmark::State& state, const GraphNodes& nodes, const std::vector<double>& samples) {
  std::vector<double> sorted = samples;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  const double replay = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  state.counters["graph_nodes"] = static_cast<double>(nodes.nodes);
  state.counters["kernel_nodes"] = static_cast<double>(nodes.kernels);
  state.counters["kernels_us"] = nodes.seconds * 1e6;
  state.counters["overhead_us_per_node"] = (replay - nodes.seconds) * 1e6 / static_cast<double>(std::max<int64_t>(nodes.nodes, 1));
}

void BM_model_decode_eager(benchmark::State& state) {
  StepBench& b = pool().get_tiny();
  const int64_t rows = state.range(0);
  watchdog_note("tiny model decode bs " + std::to_string(rows) + ", eager");
  time_host_fed(state, b.stream(), [&] { b.eager(rows); });
}

void BM_model_decode_replay(benchmark::State& state) {
  Pool& p = pool();
  StepBench& b = p.get_tiny();
  const int64_t rows = state.range(0);
  std::vector<double> samples;
  watchdog_note("tiny model decode bs " + std::to_string(rows) + ", replayed");
  time_host_fed(state, b.stream(), [&] { b.replay(rows); }, &samples);
  if (!p.tiny_nodes.count(rows)) p.tiny_nodes[rows] = time_graph_nodes("tiny model decode bs " + std::to_string(rows), b.graph(rows), b.stream());
  report_nodes(state, p.tiny_nodes[rows], samples);
}

void BM_model_prefill(benchmark::State& state) {
  StepBench& b = pool().get_tiny();
  const int64_t tokens = state.range(0);
  watchdog_note("tiny model prefill of " + std::to_string(tokens) + " tokens");
  std::mt19937_64 rng(kSeed);
  std::vector<int64_t> prompt(static_cast<size_t>(tokens));
  const uint64_t vocab = static_cast<uint64_t>(pool().tiny_model->config().vocab_size);
  for (int64_t& t : prompt) t = static_cast<int64_t>(rng() % vocab);
  b.new_request(tokens);
  b.prefill(prompt);  // warm-up
  GpuTimer timer;
  for (auto _ : state) {
    b.new_request(tokens);  // a fresh request's pools, made (and zeroed) before the timing
    state.SetIterationTime(timer.seconds_host_fed(b.stream(), [&] { b.prefill(prompt); }));
  }
  state.counters["tokens_per_s"] = benchmark::Counter(static_cast<double>(tokens), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_model_flash_layer_decode(benchmark::State& state) {
  Pool& p = pool();
  StepBench& b = p.get_flash();
  const int64_t rows = state.range(0);
  std::vector<double> samples;
  watchdog_note("Flash layer decode bs " + std::to_string(rows) + ", replayed");
  time_host_fed(state, b.stream(), [&] { b.replay(rows); }, &samples);
  if (!p.flash_nodes.count(rows)) p.flash_nodes[rows] = time_graph_nodes("Flash layer decode bs " + std::to_string(rows), b.graph(rows), b.stream());
  report_nodes(state, p.flash_nodes[rows], samples);

  const std::vector<int32_t> ids = b.routed(rows, "layers.0.ffn.route");
  const int64_t used = static_cast<int64_t>(std::set<int32_t>(ids.begin(), ids.end()).size());
  double floor = 0, bytes = 0, flops = 0;
  static std::map<int64_t, bool> printed;
  for (const OpWork& w : flash_layer_work(p.flash_config, rows, used)) {
    const double by_bytes = w.bytes / p.copy_ceiling, by_flops = p.matrix_rate > 0 ? w.flops / p.matrix_rate : 0;
    floor += std::max(by_bytes, by_flops);
    bytes += w.bytes;
    flops += w.flops;
    if (!printed[rows])
      std::printf("flash layer bs %lld floor of %-24s %9.2f us (%.1f MB, %.2f GFLOP)\n", static_cast<long long>(rows), w.op,
                  std::max(by_bytes, by_flops) * 1e6, w.bytes * 1e-6, w.flops * 1e-9);
  }
  printed[rows] = true;
  std::vector<double> sorted = samples;
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  state.counters["experts_used"] = static_cast<double>(used);
  state.counters["floor_us"] = floor * 1e6;
  state.counters["ratio_to_floors"] = sorted.empty() ? 0 : sorted[sorted.size() / 2] / floor;
  state.counters["bytes"] = bytes;
  state.counters["flops"] = flops;
  state.counters["copy_ceiling_GBps"] = p.copy_ceiling * 1e-9;
  state.counters["matrix_rate_TFLOPps"] = p.matrix_rate * 1e-12;
}

void batch_sizes(benchmark::internal::Benchmark* b, std::initializer_list<int64_t> sizes) {
  b->ArgName("bs");
  for (int64_t s : sizes) b->Arg(s);
  b->UseManualTime()->Unit(benchmark::kMicrosecond)->Repetitions(5)->Iterations(5);
}

BENCHMARK(BM_model_decode_eager)->Apply([](benchmark::internal::Benchmark* b) { batch_sizes(b, {1, 8, 64}); });
BENCHMARK(BM_model_decode_replay)->Apply([](benchmark::internal::Benchmark* b) { batch_sizes(b, {1, 8, 64}); });
BENCHMARK(BM_model_prefill)->ArgName("tokens")->Arg(1024)->Arg(8192)->UseManualTime()->Unit(benchmark::kMicrosecond)
    ->Repetitions(3)->Iterations(1);
BENCHMARK(BM_model_flash_layer_decode)->Apply([](benchmark::internal::Benchmark* b) { batch_sizes(b, {1, 64}); });

}  // namespace
}  // namespace dsv4h

int main(int argc, char** argv) { return dsv4h::run_benchmarks(argc, argv, dsv4h::start_watchdog); }
