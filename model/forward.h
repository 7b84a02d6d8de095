// The reference forward of the whole model (spec 2) in fp64: embedding, the blocks (mHC, RMSNorm,
// attention, MoE), the head, and the MTP block. A request's state is its caches; a prefill of a
// prompt from position 0 and then a decode of one token at a time run the same per-token math,
// but the compressed entries come from the prompt in one pass (prefill) or from the compressor's
// state machine (decode), so prefill-vs-decode agreement checks that bookkeeping.
#pragma once

#include <cstdint>
#include <vector>

#include "model/attention.h"
#include "model/config.h"
#include "model/op_observer.h"
#include "model/weights.h"

namespace dsv4h::model {

struct RequestState {
  std::vector<LayerCache> layers;  // the main layers
  std::vector<LayerCache> mtp;     // the MTP blocks
};

struct ForwardResult {
  RowMatrix logits;                  // [T, vocab]
  RowMatrix hidden;                  // [T, hc * dim]: the streams after the last block, before the head
  std::vector<RowMatrix> per_layer;  // [T, hc * dim] after each block (when asked for)
};

// How the reference models a backend's storage where the forward's own fp64 math differs from it.
struct ReferenceOptions {
  AttentionOptions attention;
  // Each expert's gate and up outputs and its activation rounded to bf16, the tensors the MoE
  // kernels store between their GEMMs (reference::moe_rank rounds the same two stages). Off, the
  // experts are fp64 throughout: the reference stays smooth in its inputs, as its own consistency
  // checks (prefill == decode to 1e-9) need. On for the GPU forward (gpu_forward_reference_options):
  // an expert's output is then checked, as the moe component's is, against a reference that rounds
  // where the kernels do (fp32_over_bf16_stage). Unrounded, the two stages' roundings were up to
  // 1.02 times that class's bound by themselves (H100, 2026-12-06: layers.1.ffn.shared).
  bool expert_bf16_stages = false;
};

class ReferenceModel {
 public:
  ReferenceModel(ModelConfig config, Weights weights, ReferenceOptions options = {});

  RequestState new_request() const;
  // Tokens at positions state's length onward: any number from an empty state (prefill), else
  // one (decode). A token id outside the vocabulary is BadInput. Every op is reported to
  // `observer` where one is given (model/op_observer.h).
  ForwardResult forward(RequestState& state, const std::vector<int64_t>& tokens, bool keep_layers = false,
                        OpObserver* observer = nullptr) const;
  // MTP block `m` over the main model's hidden streams [T, hc * dim] and the next tokens (the
  // tokens one position ahead), positions continuing its own cache.
  ForwardResult mtp_forward(RequestState& state, int64_t m, const RowMatrix& main_hidden,
                            const std::vector<int64_t>& next_tokens, OpObserver* observer = nullptr) const;

  const ModelConfig& config() const { return config_; }
  const Weights& weights() const { return weights_; }

 private:
  RowMatrix block(int64_t layer, const std::string& prefix, const RowMatrix& h, const std::vector<int64_t>& tokens,
                  LayerCache& cache, OpObserver* observer) const;
  RowMatrix head(const RowMatrix& h, const std::string& prefix, OpObserver* observer) const;
  RowMatrix embed(const std::vector<int64_t>& tokens, int64_t copies, const std::string& name, OpObserver* observer) const;
  RowMatrix norm(const RowMatrix& x, const std::string& weight, const std::string& name, OpObserver* observer) const;
  RowMatrix linear(const RowMatrix& x, const std::string& weight, const std::string& name, OpObserver* observer) const;
  void check_tokens(const std::vector<int64_t>& tokens, const LayerCache& first) const;

  ModelConfig config_;
  Weights weights_;
  ReferenceOptions options_;
};

}  // namespace dsv4h::model
