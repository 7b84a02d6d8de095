// safetensors and the model's weights (issue 31): a file written by Python's struct and json reads
// back with its values; seeded weights round-trip exactly (BF16) or through the FP8 block
// quantisation; every malformed, truncated or mismatched file is BadInput naming the tensor.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <unistd.h>

#include "model/safetensors.h"
#include "model/weights.h"
#include "reference/errors.h"

namespace dsv4h::model {
namespace {

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("dsv4h_model_" + std::to_string(::getpid()) + "_" + name)).string();
}

// A file of the given header text and data bytes.
std::vector<uint8_t> make_file(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> f(8 + header.size() + data_bytes, 0);
  for (int i = 0; i < 8; ++i) f[i] = static_cast<uint8_t>(static_cast<uint64_t>(header.size()) >> (8 * i));
  std::copy(header.begin(), header.end(), f.begin() + 8);
  return f;
}

std::string refusal(const std::vector<uint8_t>& file) {
  try {
    parse_safetensors(file, "w.safetensors");
  } catch (const BadInput& e) {
    return e.what();
  }
  return "";
}

std::string tiny_refusal(const ModelConfig& config, const std::vector<StTensor>& tensors) {
  try {
    weights_from_tensors(config, tensors, "w.safetensors");
  } catch (const BadInput& e) {
    return e.what();
  }
  return "";
}


TEST(ModelSafetensors, ReadsAFileWrittenByPythonStruct) {
  const std::string path = temp_path("python.safetensors");
  ASSERT_EQ(std::system(("python3 tests/model/write_safetensors.py " + path).c_str()), 0);
  const std::vector<StTensor> tensors = read_safetensors(path);
  std::filesystem::remove(path);
  ASSERT_EQ(tensors.size(), 5u);
  std::map<std::string, const StTensor*> by_name;
  for (const auto& t : tensors) by_name[t.name] = &t;
  ASSERT_TRUE(by_name.count("a.bf16") && by_name.count("layer.w.scale") && by_name.count("ids"));
  EXPECT_EQ(by_name["a.bf16"]->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(by_name["a.bf16"]->dtype, StDtype::BF16);
  EXPECT_EQ(by_name["b.f32"]->dtype, StDtype::F32);
  EXPECT_EQ(by_name["layer.w.weight"]->dtype, StDtype::F8_E4M3);
  EXPECT_EQ(by_name["layer.w.scale"]->dtype, StDtype::F8_E8M0);
  EXPECT_EQ(by_name["ids"]->dtype, StDtype::I32);
  // The values, decoded as the weights loader decodes them.
  auto values = [&](const std::string& name) {
    std::vector<double> v;
    for (int64_t i = 0; i < by_name[name]->numel(); ++i) v.push_back(st_value(*by_name[name], i));
    return v;
  };
  EXPECT_EQ(values("a.bf16"), (std::vector<double>{1.0, -2.0, 0.5, 3.25, -0.125, 96.0}));
  EXPECT_EQ(values("b.f32"), (std::vector<double>{0.1f, -1e-3f, 12345.5f, -7.0f}));
  EXPECT_EQ(values("layer.w.weight"), (std::vector<double>{1.0, -2.0, 0.5, 448.0}));
  EXPECT_EQ(values("layer.w.scale"), (std::vector<double>{8.0}));
  EXPECT_EQ(values("ids"), (std::vector<double>{0, 7, -5}));
}

TEST(ModelSafetensors, SeededWeightsRoundTripExactly) {
  const ModelConfig config = load_config("model/configs/tiny.json");
  const Weights weights = make_weights(config, 7);
  const std::string path = temp_path("tiny.safetensors");
  save_weights(config, weights, path);
  const Weights back = load_weights(config, path);
  std::filesystem::remove(path);
  ASSERT_EQ(back.all().size(), weights.all().size());
  for (const auto& [name, tensor] : weights.all()) {
    EXPECT_EQ(back.tensor(name).shape, tensor.shape) << name;
    EXPECT_EQ(back.tensor(name).values, tensor.values) << name;
  }
  // Another seed gives other weights; the same seed the same.
  EXPECT_NE(make_weights(config, 8).tensor("layers.1.attn.wq_a.weight").values, weights.tensor("layers.1.attn.wq_a.weight").values);
  EXPECT_EQ(make_weights(config, 7).tensor("layers.1.attn.wq_a.weight").values, weights.tensor("layers.1.attn.wq_a.weight").values);
}

TEST(ModelSafetensors, Fp8BlockWeightsReadBackDequantised) {
  const ModelConfig config = load_config("model/configs/tiny.json");
  const Weights weights = make_weights(config, 3);
  const std::string path = temp_path("tiny_fp8.safetensors");
  save_weights(config, weights, path, LinearFormat::FP8_BLOCK128);
  const std::vector<StTensor> tensors = read_safetensors(path);
  const Weights back = load_weights(config, path);
  std::filesystem::remove(path);
  bool saw_scale = false;
  for (const StTensor& t : tensors)
    if (t.name == "layers.0.attn.wq_b.scale") {
      saw_scale = true;
      EXPECT_EQ(t.dtype, StDtype::F8_E8M0);
      EXPECT_EQ(t.shape, (std::vector<int64_t>{32, 1}));  // [4096, 128] in 128x128 blocks
    }
  EXPECT_TRUE(saw_scale);
  const Tensor& w = weights.tensor("layers.0.attn.wq_b.weight");
  EXPECT_EQ(back.tensor("layers.0.attn.wq_b.weight").values, fp8_block128_qdq(w.values, w.shape[0], w.shape[1]));
  EXPECT_NE(back.tensor("layers.0.attn.wq_b.weight").values, w.values);
  EXPECT_EQ(back.tensor("layers.0.attn.kv_norm.weight").values, weights.tensor("layers.0.attn.kv_norm.weight").values);
}

TEST(ModelSafetensors, MalformedFilesAreNamed) {
  EXPECT_NE(refusal({1, 2, 3}).find("shorter than the 8-byte header length"), std::string::npos);
  std::vector<uint8_t> huge(16, 0xff);
  EXPECT_NE(refusal(huge).find("exceeds the"), std::string::npos) << refusal(huge);
  auto cut = make_file("{}", 0);
  cut.resize(9);
  cut[0] = 2;
  EXPECT_NE(refusal(cut).find("truncated: the header needs 2 bytes"), std::string::npos) << refusal(cut);
  EXPECT_NE(refusal(make_file("{\"a\": ", 0)).find("not valid JSON"), std::string::npos);
  EXPECT_NE(refusal(make_file("[1]", 0)).find("must be a JSON object"), std::string::npos);
  const std::string one = R"({"x.w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}})";
  EXPECT_EQ(refusal(make_file(one, 16)), "");
  EXPECT_NE(refusal(make_file(one, 12)).find("tensor \"x.w\": truncated: its data ends at byte 16 of a 12-byte"),
            std::string::npos)
      << refusal(make_file(one, 12));
  EXPECT_NE(refusal(make_file(one, 20)).find("4 bytes after the last tensor"), std::string::npos);
  const std::string wrong_size = R"({"x.w": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 16]}})";
  EXPECT_NE(refusal(make_file(wrong_size, 16)).find("tensor \"x.w\": data_offsets cover 16 bytes, its shape and dtype need 8"),
            std::string::npos);
  const std::string bad_dtype = R"({"x.w": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]}})";
  EXPECT_NE(refusal(make_file(bad_dtype, 2)).find("tensor \"x.w\": dtype \"F16\""), std::string::npos);
  const std::string negative = R"({"x.w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})";
  EXPECT_NE(refusal(make_file(negative, 4)).find("tensor \"x.w\": shape [-1]"), std::string::npos);
  const std::string overlap = R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                  "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})";
  EXPECT_NE(refusal(make_file(overlap, 12)).find("tensor \"b\" starts at byte 4 of the data section, overlapping"),
            std::string::npos)
      << refusal(make_file(overlap, 12));
  const std::string backwards = R"({"a": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}})";
  EXPECT_NE(refusal(make_file(backwards, 8)).find("tensor \"a\": data_offsets end before they begin"), std::string::npos);
  const std::string huge_offset = R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [18446744073709551611, 18446744073709551615]}})";
  EXPECT_NE(refusal(make_file(huge_offset, 4)).find("tensor \"a\": data_offsets"), std::string::npos);
}

TEST(ModelSafetensors, DamagedFilesAreBadInputNeverACrash) {
  // A small valid file, then thousands of seeded damages (a byte changed, the file cut, bytes
  // inserted): each either parses or is BadInput; any other exception fails, a crash or a read
  // past the end shows under the asan preset.
  const std::string header = R"({"a.weight": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]},
    "a.scale": {"dtype": "F8_E8M0", "shape": [1, 1], "data_offsets": [12, 13]},
    "ids": {"dtype": "I64", "shape": [2], "data_offsets": [13, 29]}, "__metadata__": {"k": "v"}})";
  const std::vector<uint8_t> good = make_file(header, 29);
  ASSERT_EQ(refusal(good), "");
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  int refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> damaged = good;
    switch (trial % 3) {
      case 0: damaged[next() % damaged.size()] = static_cast<uint8_t>(next()); break;
      case 1: damaged.resize(next() % damaged.size()); break;
      default: damaged.insert(damaged.begin() + static_cast<int64_t>(next() % damaged.size()), static_cast<uint8_t>(next()));
    }
    try {
      parse_safetensors(damaged, "damaged");
    } catch (const BadInput&) {
      ++refused;
    } catch (const std::exception& e) {
      FAIL() << "trial " << trial << ": " << e.what();
    }
  }
  EXPECT_GT(refused, 2000);
}

TEST(ModelSafetensors, MismatchedWeightsAreNamed) {
  const ModelConfig config = load_config("model/configs/tiny.json");
  const std::string path = temp_path("tiny_bad.safetensors");
  save_weights(config, make_weights(config, 1), path);
  const std::vector<StTensor> good = read_safetensors(path);
  std::filesystem::remove(path);
  auto find = [](std::vector<StTensor>& ts, const std::string& name) -> StTensor& {
    for (auto& t : ts)
      if (t.name == name) return t;
    throw std::logic_error("no " + name);
  };
  auto ts = good;
  ts.erase(ts.begin() + 3);
  EXPECT_NE(tiny_refusal(config, ts).find("tensor \"" + good[3].name + "\" is missing"), std::string::npos);
  ts = good;
  find(ts, "layers.1.attn.wkv.weight").shape = {256, 512};
  EXPECT_NE(tiny_refusal(config, ts).find("tensor \"layers.1.attn.wkv.weight\" has shape [256, 512], the config needs [512, 256]"),
            std::string::npos)
      << tiny_refusal(config, ts);
  ts = good;
  find(ts, "layers.0.ffn.gate.tid2eid").dtype = StDtype::F32;
  EXPECT_NE(tiny_refusal(config, ts).find("tensor \"layers.0.ffn.gate.tid2eid\" has dtype F32, expected I32"), std::string::npos);
  ts = good;
  find(ts, "layers.0.ffn.gate.tid2eid").bytes[4] = 8;  // expert 8 of 8
  EXPECT_NE(tiny_refusal(config, ts).find("tensor \"layers.0.ffn.gate.tid2eid\" holds expert id 8 at flat index 1"),
            std::string::npos)
      << tiny_refusal(config, ts);
  ts = good;
  StTensor& sink = find(ts, "layers.2.attn.attn_sink");
  sink.bytes[0] = 0, sink.bytes[1] = 0, sink.bytes[2] = 0xc0, sink.bytes[3] = 0x7f;  // NaN
  EXPECT_NE(tiny_refusal(config, ts).find("tensor \"layers.2.attn.attn_sink\" holds a non-finite value at flat index 0"),
            std::string::npos);
  ts = good;
  ts.push_back({"layers.9.extra", StDtype::F32, {1}, {0, 0, 0, 0}});
  EXPECT_NE(tiny_refusal(config, ts).find("unexpected tensor \"layers.9.extra\""), std::string::npos);
  ts = good;
  StTensor& wq = find(ts, "layers.0.attn.wq_a.weight");
  wq.dtype = StDtype::F8_E4M3;
  wq.bytes.resize(wq.bytes.size() / 2);
  EXPECT_NE(tiny_refusal(config, ts).find("tensor \"layers.0.attn.wq_a.weight\" is FP8 but its scale tensor \"layers.0.attn.wq_a.scale\" is missing"),
            std::string::npos)
      << tiny_refusal(config, ts);
  ts.push_back({"layers.0.attn.wq_a.scale", StDtype::F8_E8M0, {2, 2}, {127, 127, 127, 127}});
  EXPECT_NE(tiny_refusal(config, ts).find("tensor \"layers.0.attn.wq_a.scale\" has shape [2, 2], the 128x128 blocks of [128, 256] need [1, 2]"),
            std::string::npos)
      << tiny_refusal(config, ts);
}

}  // namespace
}  // namespace dsv4h::model
