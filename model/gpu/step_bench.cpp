// The GPU forward's entry for benchmarks: see step_bench.h.
#include "step_bench.h"

#include <random>
#include <stdexcept>

#include "decode_graph.h"
#include "reference/kv_cache_model1.h"
#include "weight_fill.h"

namespace dsv4h::model::gpu {

namespace {

GpuForwardOptions bench_options(bool layer, uint64_t seed) {
  GpuForwardOptions o;
  o.decode = DecodeMode::batched_graph;  // the buckets' graphs are captured; eager runs the same sequence
  o.device_weights = layer;
  o.device_weights_seed = seed;
  o.device_weights_prefix = "layers.0.";
  return o;
}

}  // namespace

StepBench::StepBench(std::unique_ptr<ReferenceModel> own, const ReferenceModel& model, bool layer, uint64_t seed)
    : own_model_(std::move(own)), forward_(std::make_unique<GpuForward>(model, bench_options(layer, seed))), layer_(layer) {}

StepBench::~StepBench() = default;

std::unique_ptr<StepBench> StepBench::whole_model(const ReferenceModel& model) {
  return std::unique_ptr<StepBench>(new StepBench(nullptr, model, false, 0));
}

std::unique_ptr<StepBench> StepBench::one_layer(const ModelConfig& config, uint64_t seed) {
  auto own = std::make_unique<ReferenceModel>(config, Weights{}, gpu_forward_reference_options());
  const ReferenceModel& model = *own;
  return std::unique_ptr<StepBench>(new StepBench(std::move(own), model, true, seed));
}

hipStream_t StepBench::stream() const { return forward_->stream_; }

void StepBench::prefill_batch(int64_t max_rows, int64_t context, uint64_t seed) {
  const GpuForward& f = *forward_;
  const ModelConfig& c = f.c_;
  f.require_batched_config();
  buckets_.clear();
  context_ = context;
  pools_ = std::make_unique<BatchPools>(f.new_batch_pools(SharedPoolLayout::for_requests(max_rows, context + 1)));
  std::mt19937_64 rng(seed);
  tokens_.resize(static_cast<size_t>(context + 2));
  for (int64_t& t : tokens_) t = static_cast<int64_t>(rng() % static_cast<uint64_t>(c.vocab_size));
  RequestPools state;
  for (int64_t l = 0; l < c.n_layers + c.n_mtp_layers; ++l) state.layers.push_back(f.request_view(*pools_, l, 0));
  if (!layer_) {
    RunPlan plan;
    plan.tokens = {tokens_};
    plan.prompt = context;
    f.call(plan, 0, 0, state);
  } else {
    // Layer 0's prefill on seeded streams of order one, then the step's own streams.
    const int64_t width = c.hc_mult * c.dim;
    DeviceBytes h(static_cast<size_t>(context * width) * sizeof(uint16_t));
    launch_fill_uniform(h.data(), true, context * width, -1.f, 1.f, seed, f.stream_);
    const DeviceBytes ids = upload(std::vector<int32_t>(tokens_.begin(), tokens_.begin() + context));
    f.block(0, "layers.0.", h, context, ids, state.layers[0]);
    layer_input_ = std::make_unique<DeviceBytes>(static_cast<size_t>(max_rows * width) * sizeof(uint16_t));
    launch_fill_uniform(layer_input_->data(), true, max_rows * width, -1.f, 1.f, seed + 1, f.stream_);
  }
  DSV4H_HIP_CHECK(hipStreamSynchronize(f.stream_));
  for (int64_t q = 1; q < max_rows; ++q) copy_request(0, q);
  DSV4H_HIP_CHECK(hipStreamSynchronize(f.stream_));
}

// Request slot `from`'s pages of every pool and its compressor rings onto slot `to`'s
// (decode_batch.h's layout: the same page numbers in every pool; ring 1 + q).
void StepBench::copy_request(int64_t from, int64_t to) const {
  const SharedPoolLayout& layout = pools_->layout;
  const int64_t pages = layout.pages_per_request();
  const auto copy_pages = [&](const DeviceBytes& pool, int64_t page_bytes) {
    if (!pool.data()) return;
    DSV4H_HIP_CHECK(hipMemcpyAsync(pool.as<uint8_t>() + layout.first_page(to) * page_bytes,
                                   pool.as<uint8_t>() + layout.first_page(from) * page_bytes,
                                   static_cast<size_t>(pages * page_bytes), hipMemcpyDeviceToDevice, forward_->stream_));
  };
  const auto copy_ring = [&](const DeviceBytes& ring) {
    if (!ring.data()) return;
    const size_t bytes = ring.bytes() / static_cast<size_t>(layout.requests + 1);
    DSV4H_HIP_CHECK(hipMemcpyAsync(ring.as<uint8_t>() + (1 + to) * bytes, ring.as<uint8_t>() + (1 + from) * bytes, bytes,
                                   hipMemcpyDeviceToDevice, forward_->stream_));
  };
  for (const SharedLayerPools& s : pools_->layers) {
    copy_pages(s.swa, reference::model1_page_bytes(kSwaPageTokens));
    copy_pages(s.comp, s.comp_page_bytes);
    copy_pages(s.index, kC4PageEntries * kIndexerEntryBytes);
    for (const DeviceBytes* ring : {&s.ring, &s.ring_out, &s.index_ring, &s.index_ring_out}) copy_ring(*ring);
  }
}

void StepBench::step(DecodeBucket& b) const {
  const GpuForward& f = *forward_;
  if (!layer_) return f.decode_step(b, *pools_);
  f.step_prologue(b, *pools_);
  f.step_block(b, *pools_, 0, "layers.0.", layer_input_->as<uint16_t>(), b.tokens.as<int32_t>());
}

DecodeBucket& StepBench::bucket(int64_t rows) {
  if (!pools_ || rows < 1 || rows > pools_->layout.requests)
    throw std::invalid_argument("StepBench: a step of " + std::to_string(rows) + " rows needs prefill_batch of at least as many");
  std::unique_ptr<DecodeBucket>& b = buckets_[rows];
  if (!b) {
    b = forward_->new_bucket(rows, *pools_, [&](DecodeBucket& d) { step(d); });
    // Each row its own token (the context is the same): rows that route apart, as a batch's do.
    const int64_t vocab = forward_->c_.vocab_size;
    std::vector<DecodeRow> real;
    for (int64_t q = 0; q < rows; ++q)
      real.push_back({q, context_, (tokens_[static_cast<size_t>(context_)] + q) % vocab, (tokens_[static_cast<size_t>(context_ + 1)] + q) % vocab});
    forward_->set_inputs(*b, decode_step_inputs(real, rows, pools_->layout));
  }
  return *b;
}

void StepBench::eager(int64_t rows) { step(bucket(rows)); }

void StepBench::replay(int64_t rows) { DSV4H_HIP_CHECK(hipGraphLaunch(bucket(rows).exec, forward_->stream_)); }

hipGraph_t StepBench::graph(int64_t rows) { return bucket(rows).graph; }

std::vector<int32_t> StepBench::routed(int64_t rows, const std::string& route_op) {
  DecodeBucket& b = bucket(rows);
  for (const StepOp& op : b.ops) {
    if (op.name != route_op) continue;
    const RowMatrix ids = download(op.outputs.at(0).view, forward_->stream_);
    std::vector<int32_t> out;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < ids.cols(); ++j) out.push_back(static_cast<int32_t>(ids(r, j)));
    return out;
  }
  throw std::invalid_argument("StepBench: the step has no op " + route_op);
}

void StepBench::poison(int64_t rows, const std::string& name) {
  for (const StepOp& op : bucket(rows).ops) {
    if (op.name != name) continue;
    DSV4H_HIP_CHECK(hipStreamSynchronize(forward_->stream_));  // after the steps before it
    for (const StepOutput& o : op.outputs) {  // the view's span: its rows, the last one's columns
      const int64_t elements = o.view.rows == 0 ? 0 : (o.view.rows - 1) * o.view.ld + o.view.cols;
      DSV4H_HIP_CHECK(hipMemset(o.view.p, 0xff, static_cast<size_t>(elements) * dtype_bytes(o.view.dtype)));
    }
    return;
  }
  throw std::invalid_argument("StepBench: the step has no op " + name);
}

void StepBench::new_request(int64_t capacity) {
  const GpuForward& f = *forward_;
  request_ = std::make_unique<RequestPools>();
  for (int64_t l = 0; l < f.c_.n_layers + f.c_.n_mtp_layers; ++l) request_->layers.push_back(f.new_layer(l, capacity));
  DSV4H_HIP_CHECK(hipStreamSynchronize(nullptr));  // the pools' zeroing (hipMemset) done before anything is timed
}

void StepBench::prefill(const std::vector<int64_t>& tokens) {
  if (!request_) throw std::logic_error("StepBench::prefill: new_request first");
  RunPlan plan;
  plan.tokens = {tokens};
  plan.prompt = static_cast<int64_t>(tokens.size());
  forward_->call(plan, 0, 0, *request_);
}

}  // namespace dsv4h::model::gpu
