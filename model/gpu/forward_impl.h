// The tiny model's GPU forward (issue 31): the class. Its members live by purpose in setup.cpp
// (weights, cuBLAS), op_plumbing.cpp (reporting, GEMMs, norms), pools.cpp (per-request pools,
// stores, compressors), attention.cpp, moe.cpp, block.cpp (embedding, mHC around attention and
// FFN, head) and driver.cpp (calls and requests), and the batched decode's in decode_*.cpp
// (decode_graph.h).
//
// What runs each op (the reference's names, model/attention.h and block.h):
//   embed, mtp.M.embed          glue: a row gather of the bf16 table (glue_kernels.hip)
//   *.hc_{attn,ffn}.pre / .post kernels/mhc.h (fp64 inside, bf16 streams, fp32 post and comb)
//   every norm                  kernels/rms_norm.h (bf16 rows, fp32 weight)
//   the projections             cuBLAS cublasGemmEx on NVIDIA (bf16 in, fp32 accumulation, output
//                               rounded once to bf16, or fp32 for gate logits, the indexer's head
//                               weights and the head's logits); the compressors' fp32 weights take
//                               the normed input widened to fp32 (COMPUTE_32F_PEDANTIC: no TF32).
//                               AMD, and NVIDIA with DSV4H_GEMM=plain (racecheck runs, setup.cpp):
//                               the plain GEMM of glue_kernels.hip (no hipBLASLt here yet).
//   attn.q_rope                 glue: each head's RMS norm and rope, fp64, into heads padded to 16
//   attn.kv_cache               glue rope of the latent, then kernels/kv_pool.h's store into the
//                               request's MODEL1 SWA pool; the op's output is the pool read back
//                               (launch_kv_gather_model1): what attention will read
//   attn.compress, attn.indexer.compress
//                               kernels/compressor.h, writing the request's C4 / C128 / indexer
//                               pools and its state ring; outputs read back from the pools
//   attn.indexer.q              GEMM, then kernels/indexer.h's query (rope, Hadamard, fp8); the
//                               output is the fp8 codes' values times their scales
//   attn.indexer.weights        GEMM with the 128^-0.5 n_heads^-0.5 scale as its alpha
//   attn.index_select           indexer logits + top-k over the request's fp8 indexer pool
//   attn.attend                 kernels/sparse_attention.h: the prefill kernel for a prefill call,
//                               the decode kernel for a decode step
//   attn.wo_a                   one GEMM a group, strided views of the attention output
//   ffn.gate / route            GEMM (fp32 logits), kernels/moe_routing.h (hash or biased top-k)
//   ffn.experts                 kernels/moe.h's filtered MoE, once per simulated expert-parallel
//                               rank (its local experts, the rest filtered), the partials summed
//   ffn.shared                  the same MoE with one expert, every token's slot on it, weight 1
//   head.hc                     glue (sigmoid weights, fp64); head.norm, head.proj as above
//   mtp.M.input                 glue: e_proj + h_proj into the streams, rounded once
//
// Layouts adapted to the kernels (the ops still report the reference's shapes):
// - Sparse attention takes heads in multiples of 16: q is written padded to 16 heads (zeros; sink 0
//   for the padding), the output read from the first n_heads. wo_a reads it in place (stride 16 x 512).
// - The latent is cached as MODEL1 FP8 (7 tiles of 64 e4m3 with ue8m0 scales, 64 bf16 rope dims):
//   the reference's cache_qdq is that same pack and unpack, so kv_cache reports the unpacked pool.
// - The indexer's keys and queries are fp8 (the indexer kernels' format), not the reference's FP4
//   simulation: the reference it is compared with is built with gpu_forward_reference_options().
// - Pools are per layer, slot = page * entries_a_page + entry with page 0 left empty (the stores'
//   sink and the compressor's dummy slot 0), a request's pages from its first_page on: SWA latents
//   of position p at slot first_page * 256 + p (pages of 256), C4 entry j at first_page * 64 + j
//   (the C4 page table of every row is first_page, first_page + 1, ...), C128 entry j at
//   first_page * 2 + j; first_page is 1 in a request's own pools. Here the window's and C128's
//   indices are made on the host per call, and C4's come from the indexer's top-k through its page
//   table (launch_indexer_page_slots); the batched decode (decode_graph.h) makes them all on the
//   device from the step's metadata, in pools a batch's requests share.
//
// Observers may change an op's outputs (fault injection, model/fault_injection.h): the forward
// then writes them back to the device and goes on from them. The outputs read back from a pool
// are written back by storing them again (the latent, the main compressed entries); the indexer's
// keys and queries are fp8 codes with scales that a host value does not give back, so a changed
// one is an error naming the op. Inputs are not reported (OpInput lists are empty): the trace and
// bisection need the outputs only.
//
// Not yet: a batched prefill (prefills run request by request, as model/backend.h allows; decode
// steps are batched and graph-replayed with DecodeMode::batched_graph, decode_graph.h), and any
// attention to the per-request path's speed (per-call allocations, host-made indices).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "device_data.h"
#include "gpu_forward.h"
#include "kernels/mhc.h"
#include "kernels/moe.h"
#include "kernels/moe_routing.h"
#include "model/decode_batch.h"

#if defined(DSV4H_GPU_NVIDIA)
#include "harness/gpu/cublas_library.h"
#endif

namespace dsv4h::model::gpu {

struct BatchPools;  // decode_graph.h
class DecodeBucket;

// One output of an op: how to read it, and how to write an observer's change back (null: it
// cannot be, and a change is an error naming the op).
struct ReportedOutput {
  const char* name;
  DeviceView view;
  OpValues values = OpValues::real;
  std::function<void(const RowMatrix&)> write = nullptr;
  std::function<RowMatrix()> read = nullptr;  // where the host value is not the view's (e.g. scaled codes)
};

// One attention layer's device state for one request: its pools, and its compressors' rings. A
// request's own pools (new_layer) hold it from page 1 and ring 1 (page 0 and ring 0 are the sink
// and the padding's); a batch's shared pools (decode_graph.h) hold request slot q from page
// first_page = 1 + q * pages and ring 1 + q, the buffers then views of the batch's.
struct LayerState {
  int64_t ratio = 0, length = 0, entries = 0, index_entries = 0;
  int64_t swa_pages = 0, comp_pages = 0, comp_page_entries = 0, comp_page_bytes = 0;
  int64_t c4_pages = 0;          // the request's page table: C4 (indexer) pages first_page ..
  int64_t index_pool_pages = 0;  // pages of the indexer pool
  int64_t first_page = 1, ring_slot = 1;
  DeviceBytes swa, comp, index;
  DeviceBytes ring, ring_out, index_ring, index_ring_out;
};

struct RequestPools {
  std::vector<LayerState> layers;  // the main layers, then the MTP blocks'
};

class GpuForward : public ModelBackend {
  friend class StepBench;  // step_bench.h: the benchmarks' entry into the launch sequences

 public:
  GpuForward(const ReferenceModel& model, const GpuForwardOptions& options);
  ~GpuForward() override;
  std::string name() const override { return "gpu"; }
  void run(const RunPlan& plan, OpObserver& observer) const override;

 private:
  using Buf = DeviceBytes;

  const float* f32(const std::string& name) const { return weight(name).as<const float>(); }
  const uint16_t* bf16(const std::string& name) const { return weight(name).as<const uint16_t>(); }
  const DeviceBytes& weight(const std::string& name) const {
    const auto it = weights_.find(name);
    if (it == weights_.end()) fail("no weight " + name + " on the device");
    return it->second;
  }
  // A weight's shape (model/weights.h's weight_specs), and an attention layer's sinks on the host
  // (`p` "...attn."): neither needs the model's host weights, which device-made ones leave empty.
  const std::vector<int64_t>& shape(const std::string& name) const;
  const std::vector<float>& sinks(const std::string& p) const;
  void upload_weights();
  void make_device_weights();

  void report(const std::string& op, std::vector<ReportedOutput> outputs) const;
  void gemm(const void* x, Dtype in, int64_t ldx, const void* w, int64_t ldw, void* y, Dtype out, int64_t ldy, int64_t rows,
            int64_t k, int64_t n, float alpha = 1.f) const;
  // y [rows, out] bf16 (or f32) = x [rows, in] W^T for the weight `name` [out, in].
  Buf linear(const uint16_t* x, int64_t rows, const std::string& name, Dtype out_dtype, float alpha = 1.f) const;
  Buf rms_norm(const uint16_t* x, int64_t rows, int64_t dim, const std::string& weight_name) const;
  // Reports the op's one output as `output` (the reference's name: "y", or gate's "logits" and the
  // indexer's "weights").
  Buf report_linear(const uint16_t* x, int64_t rows, const std::string& weight_name, const std::string& op, Dtype out = Dtype::bf16,
                    float alpha = 1.f, const char* output = "y") const;
  Buf report_norm(const uint16_t* x, int64_t rows, int64_t dim, const std::string& weight_name, const std::string& op) const;

  void call(const RunPlan& plan, int64_t r, int64_t s, RequestPools& state) const;
  Buf embed(const std::vector<int64_t>& tokens, int64_t copies, const std::string& op) const;
  Buf block(int64_t layer, const std::string& p, const Buf& h, int64_t T, const Buf& tokens, LayerState& cache) const;
  Buf attention(int64_t layer, const std::string& p, const Buf& x, int64_t T, LayerState& cache, bool prefill) const;
  Buf moe(int64_t layer, const std::string& p, const Buf& x, int64_t T, const Buf& tokens) const;
  // The routing of layer `layer`'s T rows (hash or biased top-k) and one filtered MoE of the stack
  // `stack` ("...routed" or "...shared"): its experts [first, first + local), every size and weight
  // but the workspace and `out`, which the per-request and the batched forward place each their own.
  // The mHC pre-mix of the block `p`'s `sub` ("attn" or "ffn") over T rows of streams, into x, post
  // and comb.
  MhcPreArgs mhc_pre_args(const std::string& p, const std::string& sub, const uint16_t* streams, uint16_t* x, float* post,
                          float* comb, int64_t T) const;
  MoeRoutingArgs routing_args(int64_t layer, const std::string& p, const float* logits, const int32_t* tokens, int32_t* ids,
                              float* weights, int64_t T) const;
  MoeArgs moe_args(const uint16_t* x, const int32_t* topk_ids, const float* topk_weights, int64_t T, int64_t slots,
                   const std::string& stack, int64_t first, int64_t local, float route_scale) const;
  Buf head(const Buf& h, int64_t T, const std::string& p) const;
  // The compressor of `p` ("...compressor.") over the call's x (fp32): the entries the call's
  // tokens complete into `pool` (entry j at slot first_slot + j), the ring (ring_slot's rows of
  // `ring`) carried on in place.
  void compress(int64_t layer, const std::string& p, int64_t dims, const Buf& xf, int64_t T, int64_t first_pos, uint8_t* pool,
                int64_t pool_slots, int64_t first_slot, int64_t ring_slot, Buf& ring, Buf& ring_out) const;
  LayerState new_layer(int64_t layer, int64_t capacity) const;
  void store_model1(uint8_t* pool, int64_t pages, int64_t page_entries, int64_t page_bytes, const uint16_t* rows,
                    const std::vector<int32_t>& slots) const;
  void gather_model1(uint8_t* pool, int64_t pages, int64_t page_entries, int64_t page_bytes, const std::vector<int32_t>& slots,
                     Buf& out) const;

  // The batched decode (decode_graph.h). decode_graph.cpp: the driver, the shared pools and the
  // buckets' capture; decode_report.cpp: the report after each step.
  void run_batched(const RunPlan& plan) const;
  // What the batched step assumes of the config (the metadata's window of 128, one MTP block).
  void require_batched_config() const;
  BatchPools new_batch_pools(const SharedPoolLayout& layout) const;
  LayerState request_view(BatchPools& pools, int64_t layer, int64_t request) const;
  // A bucket of `rows` rows: its buffers, the step's first run (on padding rows) and, for
  // batched_graph, its graph; `step` is the launch sequence (decode_step, or a benchmark's).
  std::unique_ptr<DecodeBucket> new_bucket(int64_t rows, const BatchPools& pools,
                                           const std::function<void(DecodeBucket&)>& step) const;
  void set_inputs(DecodeBucket& b, const DecodeStepInputs& in) const;
  void report_step(DecodeBucket& b, const BatchPools& pools, const std::vector<DecodeRow>& rows, int64_t step) const;
  // decode_step.cpp and decode_attention.cpp: the step's launch sequence, every buffer the
  // bucket's, every index made on the device. `op` "": not reported.
  void decode_step(DecodeBucket& b, const BatchPools& pools) const;
  // What every step starts with: the metadata from the input rows, the store locations translated.
  void step_prologue(DecodeBucket& b, const BatchPools& pools) const;
  void* step_linear(DecodeBucket& b, const void* x, int64_t rows, const std::string& weight_name, Dtype out, float alpha,
                    const std::string& op, const char* output = "y") const;
  uint16_t* step_norm(DecodeBucket& b, const uint16_t* x, int64_t rows, int64_t dim, const std::string& weight_name,
                      const std::string& op) const;
  uint16_t* step_embed(DecodeBucket& b, const int32_t* tokens, int64_t copies, const std::string& op) const;
  uint16_t* step_block(DecodeBucket& b, const BatchPools& pools, int64_t layer, const std::string& p, const uint16_t* h,
                       const int32_t* tokens) const;
  uint16_t* step_attention(DecodeBucket& b, const BatchPools& pools, int64_t layer, const std::string& p, const uint16_t* x) const;
  uint16_t* step_moe(DecodeBucket& b, int64_t layer, const std::string& p, const uint16_t* x, const int32_t* tokens) const;
  void step_head(DecodeBucket& b, const uint16_t* h, const std::string& p) const;
  // One compressor of a step: every row's token into its ring (rows of extend 0 process none), the
  // entries completed at `out_loc` of `pool`.
  void step_compress(DecodeBucket& b, int64_t layer, const std::string& p, int64_t dims, const float* xf, uint8_t* pool,
                     int64_t pool_slots, const int32_t* out_loc, DeviceBytes& ring, DeviceBytes& ring_out) const;

  const ReferenceModel& model_;
  const ModelConfig& c_;
  GpuForwardOptions options_;
  std::map<std::string, DeviceBytes> weights_;
  std::map<std::string, std::vector<int64_t>> shapes_;
  std::map<std::string, std::vector<float>> sinks_;
  hipStream_t stream_ = nullptr;
  // A decode step's second stream (decode_step.cpp's step_moe): the shared expert, forked off stream_
  // at `forked_` and joined back at `joined_`.
  hipStream_t side_stream_ = nullptr;
  hipEvent_t forked_ = nullptr, joined_ = nullptr;
#if defined(DSV4H_GPU_NVIDIA)
  const CublasLibrary* blas_library_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  DeviceBytes blas_workspace_;
#endif
  mutable OpObserver* observer_ = nullptr;
};

}  // namespace dsv4h::model::gpu
