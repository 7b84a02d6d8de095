// The DeepSeek-V4 model configuration (spec 1): the tiny test model of spec 1.3 and the real
// Flash and Pro configurations of 1.1 and 1.2, read from JSON (model/configs/*.json) with the
// field names of DeepSeek's ModelArgs. Every field is validated on its own (type, range) and
// against the others (lengths, divisibility); a bad one is BadInput naming the field, so the CLI
// exits 2 on it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "reference/rope.h"

namespace dsv4h::model {

struct ModelConfig {
  std::string name;
  int64_t vocab_size = 0, dim = 0, n_layers = 0, n_mtp_layers = 0;
  int64_t n_heads = 0, head_dim = 0, rope_head_dim = 0, q_lora_rank = 0, o_groups = 0, o_lora_rank = 0;
  int64_t window_size = 0;
  std::vector<int64_t> compress_ratios;  // n_layers + n_mtp_layers entries, each 0, 4 or 128
  int64_t index_n_heads = 0, index_head_dim = 0, index_topk = 0;
  double rope_theta = 0, compress_rope_theta = 0;
  // YaRN of the compressed layers; the shared rope reference implements exactly these values.
  int64_t original_seq_len = 0, rope_factor = 0, beta_fast = 0, beta_slow = 0;
  int64_t n_routed_experts = 0, n_shared_experts = 0, n_activated_experts = 0, moe_inter_dim = 0;
  std::string score_func;  // "sqrtsoftplus", the only one DeepSeek-V4 uses
  double route_scale = 0, swiglu_limit = 0;
  int64_t n_hash_layers = 0;
  int64_t hc_mult = 0, hc_sinkhorn_iters = 0;
  double hc_eps = 0, norm_eps = 0;

  int64_t nope_dim() const { return head_dim - rope_head_dim; }
  int64_t heads_per_group() const { return n_heads / o_groups; }
  int64_t hc_mix() const { return (2 + hc_mult) * hc_mult; }  // pre, post and the hc x hc combination
  // The rope table of a layer (main or MTP) by its compress ratio.
  reference::RopeConfig rope(int64_t layer) const;
};

// Parses and validates a config; `where` (a file name) starts every message.
ModelConfig parse_config(const std::string& json_text, const std::string& where);
ModelConfig load_config(const std::string& path);
std::string config_to_json(const ModelConfig& config);

}  // namespace dsv4h::model
