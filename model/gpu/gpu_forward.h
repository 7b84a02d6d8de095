// The tiny model's forward on the GPU (issue 31): a ModelBackend (model/backend.h) that runs a
// RunPlan through the project's kernels and reports every op by the reference's names and shapes,
// its outputs downloaded to host, so that bisection (harness/model/bisect.h) compares it with the
// fp64 reference op by op. forward_impl.h says which kernel runs which op and where the layouts
// are adapted. CPU builds link no_gpu_forward.cpp, which opens none and says why.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "model/attention.h"
#include "model/backend.h"
#include "model/forward.h"

namespace dsv4h::model {

// How decode steps run. per_request: each request's calls one after another, indices made on the
// host (the first version). batched_eager and batched_graph: every request prefilled on its own
// into the batch's shared pools, then each decode step of the requests still running as one batch
// through one launch sequence with no host work inside (the step's metadata built on the device by
// kernels/attn_metadata.h), eagerly or replayed from the graph captured for its bucket
// (decode_batch.h's buckets up to max_batch, padding rows beyond the real ones). Ops are reported
// after each step, each real row as its request's call.
enum class DecodeMode { per_request, batched_eager, batched_graph };

struct GpuForwardOptions {
  // The MoE as `expert_ranks` expert-parallel ranks simulated on the one GPU: rank r runs the
  // filtered MoE with its n_routed_experts / expert_ranks local experts (the rest filtered), and the
  // ranks' partial outputs are summed (the all-reduce). 1: every expert local.
  int64_t expert_ranks = 1;
  DecodeMode decode = DecodeMode::per_request;
  // The largest bucket of a batched decode (its buckets: decode_buckets(max_batch)); a plan with
  // more requests is std::invalid_argument.
  int64_t max_batch = 8;
  // Called with the stream (a hipStream_t) at the end of every run of the batched decode step's
  // launch sequence, inside its capture too: the capture guard's test puts a host sync there.
  std::function<void(void* stream)> in_step;
  // Weights made on the device from this seed (gpu/weight_fill.h) instead of uploaded from the
  // model's, which then need hold none: for benchmarks at the real configs' shapes (13 GB of
  // experts a Flash layer). Only the tensors whose names start with `device_weights_prefix` are
  // made (e.g. "layers.0."); an op needing another is an error naming its weight.
  bool device_weights = false;
  uint64_t device_weights_seed = 1;
  std::string device_weights_prefix;
};

// The reference options the GPU forward is compared with: the indexer's keys and queries are
// quantised to fp8 by the project's indexer kernels (not the FP4 simulation), so the reference
// keeps them unquantised and the ops' fp8_quantised budget holds the kernels' rounding; the
// experts round their gate/up outputs and activation to bf16 where the MoE kernels store them.
inline ReferenceOptions gpu_forward_reference_options() {
  ReferenceOptions options;
  options.attention.indexer_fp4 = false;
  options.expert_bf16_stages = true;
  return options;
}

// The GPU forward of `model` (kept by reference: it must outlive the backend) on the current
// device, its weights uploaded once. Null where this build has no GPU forward or no device can be
// used; `why_not` then says which. A config the kernels cannot run (hc_mult other than 4, a head
// dim other than 512, a rope table other than the kernels') is std::invalid_argument naming it.
std::unique_ptr<ModelBackend> open_gpu_forward(const ReferenceModel& model, const GpuForwardOptions& options,
                                               std::string& why_not);

}  // namespace dsv4h::model
