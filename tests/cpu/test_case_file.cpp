// Fixtures and dumps: one schema both ways, and malformed files rejected with the file and field.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

#include "harness/case_file.h"
#include "harness/component.h"
#include "harness/errors.h"

namespace dsv4h {
namespace {

class CaseFileTest : public ::testing::Test {
 protected:
  std::string write(const std::string& text) {
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("dsv4h_case_" + std::to_string(counter_++) + "_" + std::to_string(::getpid()) + ".json")).string();
    std::ofstream(path) << text;
    paths_.push_back(path);
    return path;
  }
  void expect_bad(const std::string& text, const std::string& mentions) {
    const std::string path = write(text);
    try {
      load_case_file(path);
      FAIL() << "accepted " << text;
    } catch (const BadInput& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
    }
  }
  void TearDown() override {
    for (const std::string& p : paths_) std::filesystem::remove(p);
  }
  int counter_ = 0;
  std::vector<std::string> paths_;
};

const char* kCase = R"j("component": "filtered_silu_mul", "case": "filtered_silu_mul(rows=2,inter=2,step=1)")j";

TEST_F(CaseFileTest, MalformedFilesNameTheField) {
  expect_bad("{", "not valid JSON");
  expect_bad("[]", "expected a JSON object");
  expect_bad(R"j({"case": "filtered_silu_mul"})j", "field \"component\" must be a string");
  expect_bad(R"j({"component": "filtered_silu_mul", "case": "filtered_silu_mul(rows=x)"})j", "\"rows\" must be a finite decimal number");
  expect_bad(R"j({"component": "other", "case": "filtered_silu_mul"})j", "field \"component\" is \"other\"");
  expect_bad(std::string("{") + kCase + R"j(, "sead": 1})j", "unknown field \"sead\"");
  expect_bad(std::string("{") + kCase + R"j(, "inputs": {"gate_up": {"dtype": "bf17", "shape": [1], "data": [1]}}})j",
             "inputs.gate_up.dtype: unknown dtype \"bf17\"");
  expect_bad(std::string("{") + kCase + R"j(, "inputs": {"gate_up": {"dtype": "bf16", "shape": [2, 2], "data": [1, 2, 3]}}})j",
             "inputs.gate_up.data: 3 elements, shape [2, 2] needs 4");
  expect_bad(std::string("{") + kCase + R"j(, "inputs": {"expert_ids": {"dtype": "i32", "shape": [1], "data": [0.5]}}})j",
             "inputs.expert_ids.data[0]: expected an integer");
  expect_bad(std::string("{") + kCase + R"j(, "inputs": {"expert_ids": {"dtype": "i32", "shape": [1], "data": [4294967296]}}})j",
             "does not fit i32");
  expect_bad(std::string("{") + kCase + R"j(, "inputs": {"x": {"dtype": "f32", "shape": [-1], "data": []}}})j",
             "inputs.x.shape: expected non-negative integers");
  expect_bad(std::string("{") + kCase + R"j(, "seed": 2, "case": "filtered_silu_mul(seed=3)"})j", "disagrees");
  const std::string inputs = R"j("inputs": {"gate_up": {"dtype": "bf16", "shape": [2, 4], "data": [1,2,3,4,5,6,7,8]},
                                            "expert_ids": {"dtype": "i32", "shape": [2], "data": [0, -1]}})j";
  expect_bad(std::string("{") + kCase + ", " + inputs + R"j(, "outputs": {"expected": {}}})j",
             "outputs.expected lacks the output \"out\"");
  expect_bad(std::string("{") + kCase + ", " + inputs +
                 R"j(, "outputs": {"expected": {"outt": {"dtype": "bf16", "shape": [1], "data": [1]}}}})j",
             "outputs.expected.outt is not an output of filtered_silu_mul");
  expect_bad(std::string("{") + kCase + R"j(, "inputs": {"x": {"dtype": "u8", "shape": [100000000000000], "data": [1]}}})j",
             "inputs.x.shape: shape [100000000000000] has more than 2^40 elements");
  expect_bad(std::string("{") + kCase + R"j(, "inputs": {"x": {"dtype": "u8", "shape": [1000000000000], "data": [1]}}})j",
             "inputs.x.data: 1 elements, shape [1000000000000] needs 1000000000000");  // refused before allocating
  expect_bad(std::string("{") + kCase + R"j(, "inputs": {"x": {"dtype": "f32", "shape": [1], "data": [1e400]}}})j",
             "not valid JSON");  // beyond double's range
  expect_bad(std::string("{") + kCase + R"j(, "inputs": {"x": {"dtype": "i32", "shape": [1], "data": [9223372036854775808]}}})j",
             "does not fit i32");
  expect_bad(std::string("{") + kCase + R"j(, "seed": 10000000000000000000})j", "below 10^19");
  // A misspelt "expected" would skip the comparison with the stored outputs.
  expect_bad(std::string("{") + kCase + ", " + inputs + R"j(, "outputs": {"expectd": {}}})j", "unknown field \"outputs.expectd\"");
  expect_bad(std::string("{") + kCase + ", " + inputs +
                 R"j(, "outputs": {"expected": {"out": {"dtype": "bf16", "shape": [1, 2], "data": [1, 2]}}}})j",
             "outputs.expected.out is bf16[1, 2], the case's output is bf16[2, 2]");
}

// Issue 28: 100000 levels in a tensor's data or shape overflowed the stack in the error message's
// own dump of the element, and a fixture so nested crashed all of verify.
TEST_F(CaseFileTest, DeepNestingIsRefusedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_bad(std::string("{") + kCase + R"j(, "inputs": {"gate_up": {"dtype": "bf16", "shape": [1], "data": )j" + deep + "}}}",
             "nest deeper than 64 levels");
  expect_bad(std::string("{") + kCase + R"j(, "inputs": {"gate_up": {"dtype": "bf16", "data": [], "shape": )j" + deep + "}}}",
             "nest deeper than 64 levels");
  // Brackets inside strings are text, not nesting.
  EXPECT_NO_THROW(parse_json_text("[\"" + std::string(1000, '[') + "\"]", "text"));
  EXPECT_NO_THROW(parse_json_text(std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']'), "text"));
}

// A bad element is described, never dumped whole: an array by its size, a long string cut short.
TEST_F(CaseFileTest, MessagesQuoteABoundedPrefix) {
  const std::string nested = std::string(60, '[') + std::string(60, ']');
  const std::string long_string = "\"" + std::string(1 << 20, 'x') + "\"";
  for (const auto& [element, mentions] : {std::pair<std::string, std::string>{nested, "an array of 1 elements"},
                                          {long_string, "(1048576 bytes)"}}) {
    const std::string path = write(std::string("{") + kCase + R"j(, "inputs": {"gate_up": {"dtype": "bf16", "shape": [1], "data": [)j" +
                                   element + "]}}}");
    try {
      load_case_file(path);
      FAIL() << "accepted " << mentions;
    } catch (const BadInput& e) {
      EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
      EXPECT_LT(std::string(e.what()).size(), 400u);
    }
  }
  // The parser's own message quotes what it read: an unterminated megabyte string is cut short.
  try {
    parse_json_text("[" + long_string.substr(0, long_string.size() - 1), "text");
    FAIL() << "accepted an unterminated string";
  } catch (const BadInput& e) {
    EXPECT_LT(std::string(e.what()).size(), 400u);
  }
}

// Issue 28: a finite value beyond the dtype's range became an infinity (bf16, f32) or a NaN (fp8)
// unseen. Infinities and NaN are written as such.
TEST_F(CaseFileTest, ValuesBeyondTheDtypesRangeAreRefused) {
  const auto tensor = [](const std::string& dtype, const std::string& value) {
    return std::string("{") + kCase + R"j(, "inputs": {"x": {"dtype": ")j" + dtype + R"j(", "shape": [1], "data": [)j" + value + "]}}}";
  };
  expect_bad(tensor("bf16", "3.4e38"), "inputs.x.data[0]: 3.4e+38 is beyond bf16's range");
  expect_bad(tensor("bf16", "-1e39"), "beyond bf16's range");
  expect_bad(tensor("f32", "1e39"), "beyond f32's range");
  expect_bad(tensor("fp8_e4m3", "500"), "beyond fp8_e4m3's range");
  for (const auto& [dtype, value] : {std::pair<std::string, std::string>{"bf16", "3.38e38"}, {"bf16", "\"inf\""},
                                     {"fp8_e4m3", "448"}, {"fp8_e4m3", "\"nan\""}, {"f32", "3.4e38"}}) {
    const CaseFile f = load_case_file(write(tensor(dtype, value)));
    EXPECT_EQ(f.inputs->at("x").numel(), 1) << dtype << " " << value;
  }
}

TEST_F(CaseFileTest, WrittenJsonIsUtf8) {
  // A commit label cut inside a character, a file name in another encoding.
  const std::string path = write("");
  write_json_file(path, {{"commit", "abc\xe2\x82"}, {"file", "caf\xe9.json"}});
  const nlohmann::json j = read_json_file(path);
  EXPECT_EQ(j["commit"], "abc\xef\xbf\xbd");
  EXPECT_EQ(j["file"], "caf\xef\xbf\xbd.json");
}

TEST_F(CaseFileTest, ADirectoryIsNoCaseFile) {
  const std::string dir = std::filesystem::temp_directory_path().string();
  try {
    load_case_file(dir);
    FAIL() << "accepted the directory " << dir;
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find(dir + ": a directory"), std::string::npos) << e.what();
  }
}

TEST_F(CaseFileTest, AFullDiskIsAWriteError) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full here";
  EXPECT_THROW(write_json_file("/dev/full", {{"x", 1}}), std::runtime_error);
}

TEST_F(CaseFileTest, DumpLoadsBackBitForBit) {
  const Case c = parse_case("filtered_silu_mul(rows=3,inter=5,kept=0.5,seed=11)");
  const Component& component = registry().get("filtered_silu_mul");
  TensorMap inputs = component.make_inputs(c);
  inputs["gate_up"].set(0, INFINITY);
  inputs["gate_up"].set(1, -INFINITY);
  std::ostringstream document;
  write_case_document(document, c, inputs, {{"reference", inputs}});
  const std::string path = write(document.str());
  EXPECT_LE(document.str().size(), case_document_bytes_bound(inputs, {{"reference", inputs}}));
  const CaseFile f = load_case_file(path);
  EXPECT_EQ(f.test_case.str(), c.str());
  ASSERT_TRUE(f.inputs.has_value());
  for (const auto& [name, t] : inputs)
    for (int64_t i = 0; i < t.numel(); ++i) ASSERT_EQ(f.inputs->at(name).bits(i), t.bits(i)) << name << i;
}

}  // namespace
}  // namespace dsv4h
