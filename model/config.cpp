#include "config.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "harness/json_file.h"
#include "reference/errors.h"
#include "reference/kv_cache_model1.h"

namespace dsv4h::model {
namespace {

using nlohmann::json;

std::string field_error(const std::string& where, const std::string& field, const std::string& what) {
  return where + ": field \"" + field + "\" " + what;
}

int64_t read_int(const json& value, const std::string& where, const std::string& field, int64_t lo, int64_t hi) {
  if (!value.is_number_integer())  // a bool is no integer, nor is 1.5
    throw BadInput(field_error(where, field, "must be an integer, got " + value.dump()));
  // An unsigned beyond int64 reads as negative through get<int64_t>: range-check it as unsigned.
  if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(hi))
    throw BadInput(field_error(where, field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                                 "], got " + value.dump()));
  const int64_t v = value.get<int64_t>();
  if (v < lo || v > hi)
    throw BadInput(field_error(where, field, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                                                 "], got " + std::to_string(v)));
  return v;
}

// Real numbers in the open-or-closed range (lo, hi]: every one of ours is positive.
double read_positive(const json& value, const std::string& where, const std::string& field, double hi) {
  if (!value.is_number()) throw BadInput(field_error(where, field, "must be a number, got " + value.dump()));
  const double v = value.get<double>();
  if (!(v > 0 && v <= hi)) {
    std::ostringstream range;
    range << "must be in (0, " << hi << "], got " << value.dump();
    throw BadInput(field_error(where, field, range.str()));
  }
  return v;
}

std::string read_string(const json& value, const std::string& where, const std::string& field) {
  if (!value.is_string()) throw BadInput(field_error(where, field, "must be a string, got " + value.dump()));
  return value.get<std::string>();
}

// One reader per field: the table is the list of known fields.
using Reader = std::function<void(const json&, ModelConfig&, const std::string&)>;

std::map<std::string, Reader> field_readers() {
  constexpr int64_t kBig = int64_t{1} << 24;
  std::map<std::string, Reader> r;
  auto int_field = [&r](const char* name, int64_t ModelConfig::*member, int64_t lo, int64_t hi) {
    r[name] = [=](const json& v, ModelConfig& c, const std::string& w) { c.*member = read_int(v, w, name, lo, hi); };
  };
  auto real_field = [&r](const char* name, double ModelConfig::*member, double hi) {
    r[name] = [=](const json& v, ModelConfig& c, const std::string& w) { c.*member = read_positive(v, w, name, hi); };
  };
  r["name"] = [](const json& v, ModelConfig& c, const std::string& w) { c.name = read_string(v, w, "name"); };
  int_field("vocab_size", &ModelConfig::vocab_size, 2, kBig);
  int_field("dim", &ModelConfig::dim, 1, 65536);
  int_field("n_layers", &ModelConfig::n_layers, 1, 1024);
  int_field("n_mtp_layers", &ModelConfig::n_mtp_layers, 0, 4);
  int_field("n_heads", &ModelConfig::n_heads, 1, 1024);
  int_field("head_dim", &ModelConfig::head_dim, 1, 65536);
  int_field("rope_head_dim", &ModelConfig::rope_head_dim, 1, 65536);
  int_field("q_lora_rank", &ModelConfig::q_lora_rank, 1, 65536);
  int_field("o_groups", &ModelConfig::o_groups, 1, 1024);
  int_field("o_lora_rank", &ModelConfig::o_lora_rank, 1, 65536);
  int_field("window_size", &ModelConfig::window_size, 1, kBig);
  r["compress_ratios"] = [](const json& v, ModelConfig& c, const std::string& w) {
    if (!v.is_array()) throw BadInput(field_error(w, "compress_ratios", "must be an array of integers"));
    if (v.size() > 1028) throw BadInput(field_error(w, "compress_ratios", "has more than 1028 entries"));
    c.compress_ratios.clear();
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string name = "compress_ratios[" + std::to_string(i) + "]";
      const int64_t ratio = read_int(v[i], w, name, 0, 128);
      if (ratio != 0 && ratio != 4 && ratio != 128)
        throw BadInput(field_error(w, name, "must be 0, 4 or 128, got " + std::to_string(ratio)));
      c.compress_ratios.push_back(ratio);
    }
  };
  int_field("index_n_heads", &ModelConfig::index_n_heads, 1, 1024);
  int_field("index_head_dim", &ModelConfig::index_head_dim, 1, 65536);
  int_field("index_topk", &ModelConfig::index_topk, 1, kBig);
  real_field("rope_theta", &ModelConfig::rope_theta, 1e12);
  real_field("compress_rope_theta", &ModelConfig::compress_rope_theta, 1e12);
  int_field("original_seq_len", &ModelConfig::original_seq_len, 1, int64_t{1} << 40);
  int_field("rope_factor", &ModelConfig::rope_factor, 1, 1 << 20);
  int_field("beta_fast", &ModelConfig::beta_fast, 1, 1 << 20);
  int_field("beta_slow", &ModelConfig::beta_slow, 1, 1 << 20);
  int_field("n_routed_experts", &ModelConfig::n_routed_experts, 1, 65536);
  int_field("n_shared_experts", &ModelConfig::n_shared_experts, 1, 1);  // DeepSeek's MoE asserts one
  int_field("n_activated_experts", &ModelConfig::n_activated_experts, 1, 1024);
  int_field("moe_inter_dim", &ModelConfig::moe_inter_dim, 1, 65536);
  r["score_func"] = [](const json& v, ModelConfig& c, const std::string& w) {
    c.score_func = read_string(v, w, "score_func");
    if (c.score_func != "sqrtsoftplus")
      throw BadInput(field_error(w, "score_func", "must be \"sqrtsoftplus\" (the only one modelled), got " + v.dump()));
  };
  real_field("route_scale", &ModelConfig::route_scale, 1e6);
  real_field("swiglu_limit", &ModelConfig::swiglu_limit, 1e6);
  int_field("n_hash_layers", &ModelConfig::n_hash_layers, 0, 1024);
  int_field("hc_mult", &ModelConfig::hc_mult, 1, 16);
  int_field("hc_sinkhorn_iters", &ModelConfig::hc_sinkhorn_iters, 1, 1000);
  real_field("hc_eps", &ModelConfig::hc_eps, 0.5);
  real_field("norm_eps", &ModelConfig::norm_eps, 0.5);
  return r;
}

void require(bool ok, const std::string& where, const std::string& field, const std::string& what) {
  if (!ok) throw BadInput(field_error(where, field, what));
}

// The relations between fields, each blamed on the field that breaks it.
void check_consistency(const ModelConfig& c, const std::string& w) {
  using reference::kModel1Dims;
  using reference::kModel1RopeDims;
  using reference::kRopeDim;
  require(c.head_dim == kModel1Dims, w, "head_dim",
          "must be " + std::to_string(kModel1Dims) + " (the MODEL1 cache latent), got " + std::to_string(c.head_dim));
  require(c.rope_head_dim == kRopeDim && kRopeDim == kModel1RopeDims, w, "rope_head_dim",
          "must be " + std::to_string(kRopeDim) + ", got " + std::to_string(c.rope_head_dim));
  require(c.index_head_dim == 128, w, "index_head_dim",
          "must be 128 (the indexer's Hadamard rotation and cache entry), got " + std::to_string(c.index_head_dim));
  require(c.n_heads % c.o_groups == 0, w, "o_groups",
          "must divide n_heads = " + std::to_string(c.n_heads) + ", got " + std::to_string(c.o_groups));
  const int64_t layers = c.n_layers + c.n_mtp_layers;
  require(static_cast<int64_t>(c.compress_ratios.size()) == layers, w, "compress_ratios",
          "has " + std::to_string(c.compress_ratios.size()) + " entries, n_layers + n_mtp_layers = " +
              std::to_string(layers) + " needed");
  for (int64_t i = c.n_layers; i < layers; ++i)
    require(c.compress_ratios[i] == 0, w, "compress_ratios[" + std::to_string(i) + "]",
            "must be 0: an MTP layer is sliding-window only");
  const int64_t largest = *std::max_element(c.compress_ratios.begin(), c.compress_ratios.end());
  // A compressed block's unfinished tail must lie inside the window, or its tokens are invisible.
  require(c.window_size >= largest, w, "window_size",
          "must be at least the largest compress ratio " + std::to_string(largest) + ", got " +
              std::to_string(c.window_size));
  require(c.n_activated_experts <= c.n_routed_experts, w, "n_activated_experts",
          "must be at most n_routed_experts = " + std::to_string(c.n_routed_experts) + ", got " +
              std::to_string(c.n_activated_experts));
  require(c.n_hash_layers <= c.n_layers, w, "n_hash_layers",
          "must be at most n_layers = " + std::to_string(c.n_layers) + ", got " + std::to_string(c.n_hash_layers));
  // The shared rope reference's YaRN is fixed at these (spec 2.4).
  require(c.original_seq_len == 65536, w, "original_seq_len", "must be 65536 (the YaRN of spec 2.4)");
  require(c.rope_factor == 16, w, "rope_factor", "must be 16 (the YaRN of spec 2.4)");
  require(c.beta_fast == 32, w, "beta_fast", "must be 32 (the YaRN of spec 2.4)");
  require(c.beta_slow == 1, w, "beta_slow", "must be 1 (the YaRN of spec 2.4)");
}

}  // namespace

reference::RopeConfig ModelConfig::rope(int64_t layer) const {
  if (compress_ratios.at(layer) == 0) return {rope_theta, false};
  return {compress_rope_theta, true};
}

ModelConfig parse_config(const std::string& json_text, const std::string& where) {
  const json document = parse_json_text(json_text, where);
  if (!document.is_object()) throw BadInput(where + ": a model config must be a JSON object");
  const auto readers = field_readers();
  ModelConfig config;
  for (const auto& [key, value] : document.items()) {
    const auto reader = readers.find(key);
    if (reader == readers.end()) throw BadInput(where + ": unknown field \"" + key + "\"");
    reader->second(value, config, where);
  }
  for (const auto& [key, reader] : readers)
    if (!document.contains(key)) throw BadInput(where + ": missing field \"" + key + "\"");
  check_consistency(config, where);
  return config;
}

ModelConfig load_config(const std::string& path) {
  return parse_config(read_json_file(path).dump(), path);
}

std::string config_to_json(const ModelConfig& c) {
  json j;
  j["name"] = c.name;
  j["vocab_size"] = c.vocab_size;
  j["dim"] = c.dim;
  j["n_layers"] = c.n_layers;
  j["n_mtp_layers"] = c.n_mtp_layers;
  j["n_heads"] = c.n_heads;
  j["head_dim"] = c.head_dim;
  j["rope_head_dim"] = c.rope_head_dim;
  j["q_lora_rank"] = c.q_lora_rank;
  j["o_groups"] = c.o_groups;
  j["o_lora_rank"] = c.o_lora_rank;
  j["window_size"] = c.window_size;
  j["compress_ratios"] = c.compress_ratios;
  j["index_n_heads"] = c.index_n_heads;
  j["index_head_dim"] = c.index_head_dim;
  j["index_topk"] = c.index_topk;
  j["rope_theta"] = c.rope_theta;
  j["compress_rope_theta"] = c.compress_rope_theta;
  j["original_seq_len"] = c.original_seq_len;
  j["rope_factor"] = c.rope_factor;
  j["beta_fast"] = c.beta_fast;
  j["beta_slow"] = c.beta_slow;
  j["n_routed_experts"] = c.n_routed_experts;
  j["n_shared_experts"] = c.n_shared_experts;
  j["n_activated_experts"] = c.n_activated_experts;
  j["moe_inter_dim"] = c.moe_inter_dim;
  j["score_func"] = c.score_func;
  j["route_scale"] = c.route_scale;
  j["swiglu_limit"] = c.swiglu_limit;
  j["n_hash_layers"] = c.n_hash_layers;
  j["hc_mult"] = c.hc_mult;
  j["hc_sinkhorn_iters"] = c.hc_sinkhorn_iters;
  j["hc_eps"] = c.hc_eps;
  j["norm_eps"] = c.norm_eps;
  return j.dump(2);
}

}  // namespace dsv4h::model
