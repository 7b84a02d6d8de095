// The model configs (issue 31, spec 1): the three shipped files parse, and each class of bad field
// (unknown, wrong type, out of range, inconsistent with another) is BadInput naming the field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "model/config.h"
#include "reference/errors.h"

namespace dsv4h::model {
namespace {

nlohmann::json tiny_json() { return nlohmann::json::parse(config_to_json(load_config("model/configs/tiny.json"))); }

// The message of the BadInput that parsing `document` throws ("" if it parses).
std::string refusal(const nlohmann::json& document) {
  try {
    parse_config(document.dump(), "cfg.json");
  } catch (const BadInput& e) {
    return e.what();
  }
  return "";
}

TEST(ModelConfig, ShippedConfigsParse) {
  const ModelConfig tiny = load_config("model/configs/tiny.json");
  EXPECT_EQ(tiny.dim, 256);
  EXPECT_EQ(tiny.compress_ratios, (std::vector<int64_t>{0, 4, 128, 4, 0}));
  EXPECT_EQ(tiny.n_hash_layers, 1);
  EXPECT_EQ(tiny.hc_sinkhorn_iters, 20);
  const ModelConfig flash = load_config("model/configs/flash.json");
  EXPECT_EQ(flash.compress_ratios.size(), 44u);
  EXPECT_EQ(flash.compress_ratios[2], 4);
  EXPECT_EQ(flash.compress_ratios[3], 128);
  EXPECT_EQ(flash.heads_per_group(), 8);
  const ModelConfig pro = load_config("model/configs/pro.json");
  EXPECT_EQ(pro.compress_ratios.size(), 62u);
  EXPECT_EQ(pro.index_topk, 1024);
  EXPECT_EQ(pro.route_scale, 2.5);
}

TEST(ModelConfig, RoundTripsThroughJson) {
  const ModelConfig tiny = load_config("model/configs/tiny.json");
  EXPECT_EQ(config_to_json(parse_config(config_to_json(tiny), "again")), config_to_json(tiny));
}

TEST(ModelConfig, LayerRopeFollowsTheRatio) {
  const ModelConfig tiny = load_config("model/configs/tiny.json");
  EXPECT_FALSE(tiny.rope(0).yarn);
  EXPECT_EQ(tiny.rope(0).base, 10000);
  EXPECT_TRUE(tiny.rope(1).yarn);
  EXPECT_EQ(tiny.rope(2).base, 160000);
  EXPECT_FALSE(tiny.rope(4).yarn);  // the MTP layer
}

TEST(ModelConfig, UnknownAndMissingFieldsAreNamed) {
  auto doc = tiny_json();
  doc["n_layer"] = 4;
  EXPECT_NE(refusal(doc).find("unknown field \"n_layer\""), std::string::npos) << refusal(doc);
  doc = tiny_json();
  doc.erase("moe_inter_dim");
  EXPECT_NE(refusal(doc).find("missing field \"moe_inter_dim\""), std::string::npos) << refusal(doc);
}

TEST(ModelConfig, WrongTypesAreNamed) {
  for (const auto& [field, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"dim", 1.5}, {"dim", "256"}, {"dim", true}, {"route_scale", "1.5"}, {"score_func", 3},
           {"compress_ratios", 4}, {"name", nullptr}}) {
    auto doc = tiny_json();
    doc[field] = value;
    const std::string message = refusal(doc);
    EXPECT_NE(message.find("field \"" + field + "\" must be"), std::string::npos) << field << ": " << message;
    EXPECT_EQ(message.rfind("cfg.json: ", 0), 0u) << message;
  }
  auto doc = tiny_json();
  doc["compress_ratios"][1] = "4";
  EXPECT_NE(refusal(doc).find("field \"compress_ratios[1]\" must be an integer"), std::string::npos);
}

TEST(ModelConfig, OutOfRangeValuesAreNamed) {
  for (const auto& [field, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"dim", 0}, {"n_layers", -1}, {"vocab_size", 18446744073709551615ull}, {"norm_eps", 0.0},
           {"hc_eps", -1e-6}, {"swiglu_limit", 1e300}, {"n_shared_experts", 2}, {"score_func", "softmax"}}) {
    auto doc = tiny_json();
    doc[field] = value;
    const std::string message = refusal(doc);
    EXPECT_NE(message.find("field \"" + field + "\" must be"), std::string::npos) << field << ": " << message;
  }
  auto doc = tiny_json();
  doc["compress_ratios"][2] = 64;
  EXPECT_NE(refusal(doc).find("\"compress_ratios[2]\" must be 0, 4 or 128, got 64"), std::string::npos);
}

TEST(ModelConfig, InconsistentFieldsAreNamed) {
  auto doc = tiny_json();
  doc["n_layers"] = 5;
  EXPECT_NE(refusal(doc).find("\"compress_ratios\" has 5 entries, n_layers + n_mtp_layers = 6 needed"),
            std::string::npos)
      << refusal(doc);
  doc = tiny_json();
  doc["compress_ratios"][4] = 4;
  EXPECT_NE(refusal(doc).find("\"compress_ratios[4]\" must be 0: an MTP layer"), std::string::npos);
  doc = tiny_json();
  doc["o_groups"] = 3;
  EXPECT_NE(refusal(doc).find("\"o_groups\" must divide n_heads = 8"), std::string::npos);
  doc = tiny_json();
  doc["n_activated_experts"] = 9;
  EXPECT_NE(refusal(doc).find("\"n_activated_experts\" must be at most n_routed_experts = 8"), std::string::npos);
  doc = tiny_json();
  doc["n_hash_layers"] = 5;
  EXPECT_NE(refusal(doc).find("\"n_hash_layers\" must be at most n_layers"), std::string::npos);
  doc = tiny_json();
  doc["window_size"] = 64;
  EXPECT_NE(refusal(doc).find("\"window_size\" must be at least the largest compress ratio 128"), std::string::npos);
  doc = tiny_json();
  doc["head_dim"] = 256;
  EXPECT_NE(refusal(doc).find("\"head_dim\" must be 512"), std::string::npos);
  doc = tiny_json();
  doc["rope_factor"] = 40;
  EXPECT_NE(refusal(doc).find("\"rope_factor\" must be 16"), std::string::npos);
}

TEST(ModelConfig, NotAnObjectOrNotJson) {
  EXPECT_THROW(parse_config("[1, 2]", "cfg.json"), BadInput);
  EXPECT_THROW(parse_config("{\"dim\": ", "cfg.json"), BadInput);
  EXPECT_THROW(load_config("no/such/config.json"), BadInput);
}

}  // namespace
}  // namespace dsv4h::model
