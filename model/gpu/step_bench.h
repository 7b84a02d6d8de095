// The GPU forward's entry for benchmarks (issue 31; tests/bench/bench_model.cpp): its own launch
// sequences, with nothing reported, read back or synchronised inside them.
//
// - The batched decode step (decode_graph.h) of the whole model, or of one decoder layer (layer 0
//   of the config: the step's metadata and store locations, then the layer's block, mHC around
//   attention with its compressors, indexer and sparse attention, and the MoE, on seeded streams).
//   prefill_batch makes the batch: one request prefilled over `context` tokens through the
//   per-request forward (the whole model, or layer 0's block alone on seeded streams), then its
//   pages and compressor rings copied to every other request slot, so that each row reads memory
//   of its own (of the same content) at the cost of one prefill. eager(rows) enqueues one step of
//   the first `rows` requests at position `context` as the forward runs it without a graph (the
//   host launching every kernel); replay(rows) launches the bucket's graph (captured at the
//   bucket's first use). Every step writes the same positions: the state after it is not a
//   longer context, only the same step again.
// - The per-request prefill of one request (GpuForward::run's call 0 of a plan): new_request
//   makes the request's pools (allocations: keep it out of the timing), prefill runs the call,
//   whose host work (per-op allocations, host-made indices, synchronisations) is part of it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/portability.h"
#include "model/forward.h"

namespace dsv4h::model::gpu {

class GpuForward;
class DeviceBytes;
struct BatchPools;
class DecodeBucket;
struct RequestPools;

class StepBench {
 public:
  // The whole model of `model` (kept by reference), its host weights uploaded.
  static std::unique_ptr<StepBench> whole_model(const ReferenceModel& model);
  // Layer 0 of `config` alone, its weights made on the device from `seed` (GpuForwardOptions::
  // device_weights): the real configs' shapes without their host weights.
  static std::unique_ptr<StepBench> one_layer(const ModelConfig& config, uint64_t seed);
  ~StepBench();
  StepBench(const StepBench&) = delete;
  StepBench& operator=(const StepBench&) = delete;

  hipStream_t stream() const;

  // The decode batch: max_rows requests of `context` tokens of seeded ids (see the header).
  void prefill_batch(int64_t max_rows, int64_t context, uint64_t seed);
  void eager(int64_t rows);
  void replay(int64_t rows);
  // The bucket's captured graph (for counting and timing its nodes).
  hipGraph_t graph(int64_t rows);
  // The experts the rows' last step routed each row to (the op `route_op`'s ids, e.g.
  // "layers.0.ffn.route"; rows x n_activated_experts, read back): whose weights the step read.
  std::vector<int32_t> routed(int64_t rows, const std::string& route_op);
  // The op's outputs in the rows' bucket set to all ones bits, so that a step that leaves them
  // unwritten shows (its buffers are the same in every run of the bucket).
  void poison(int64_t rows, const std::string& op);

  // The per-request prefill (see the header).
  void new_request(int64_t capacity);
  void prefill(const std::vector<int64_t>& tokens);

 private:
  StepBench(std::unique_ptr<ReferenceModel> own, const ReferenceModel& model, bool layer, uint64_t seed);
  DecodeBucket& bucket(int64_t rows);
  void step(DecodeBucket& b) const;
  void copy_request(int64_t from, int64_t to) const;

  std::unique_ptr<ReferenceModel> own_model_;  // one_layer's: the config, no host weights
  std::unique_ptr<GpuForward> forward_;
  bool layer_ = false;
  std::unique_ptr<BatchPools> pools_;
  std::map<int64_t, std::unique_ptr<DecodeBucket>> buckets_;
  std::vector<int64_t> tokens_;  // the batch's: context tokens, the step's token, its next
  int64_t context_ = 0;
  std::unique_ptr<RequestPools> request_;
  std::unique_ptr<DeviceBytes> layer_input_;  // the layer step's streams, max_rows rows
};

}  // namespace dsv4h::model::gpu
