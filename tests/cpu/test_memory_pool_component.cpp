// The memory_pool descriptor on the CPU: every verify case runs on the reference; the pools hold
// exactly the stored entries where the location arithmetic puts them; the store order changes
// nothing; bad inputs are errors naming the value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>

#include "harness/component.h"
#include "harness/compare.h"
#include "harness/errors.h"
#include "harness/poison.h"
#include "harness/verify.h"
#include "reference/kv_cache_model1.h"

namespace dsv4h {
namespace {

const Component& pool() { return registry().get("memory_pool"); }

TEST(MemoryPoolComponent, EveryVerifyCasePassesOnTheReference) {
  for (const std::string& text : pool().verify_cases) {
    const CaseRun run = run_case(pool(), parse_case(text, 1), nullptr);
    EXPECT_TRUE(run.result.passed()) << run.result.report();
  }
}

int64_t written_words(const HostTensor& t) {
  int64_t n = 0;
  for (int64_t i = 0; i < t.numel(); ++i) n += !is_poison(t, i, Poison::a);
  return n;
}

TEST(MemoryPoolComponent, PoolsHoldExactlyTheStoredEntries) {
  const Case c = parse_case("memory_pool(tokens=50,per_request=7,layers=5,swa_page=64,window=16,full_pages=40,swa_pages=40)", 3);
  const CaseRun run = run_case(pool(), c, nullptr);
  ASSERT_TRUE(run.result.passed()) << run.result.report();
  const TensorMap& out = run.outputs.at("reference");
  int64_t swa_rows = 0, c4_rows = 0, c128_rows = 0;
  for (int64_t i = 0; i < 50; ++i) {
    swa_rows += out.at("swa_out_loc").data<int32_t>()[i] > 0;
    c4_rows += out.at("c4_out_loc").data<int32_t>()[i] > 0;
    c128_rows += out.at("c128_out_loc").data<int32_t>()[i] > 0;
  }
  ASSERT_GT(swa_rows, 0);
  ASSERT_GT(c4_rows, 0) << "seed 3 should complete some 4-token blocks";
  // Layers 0..4 have ratios 0, 4, 128, 4, 128: 5 swa layers, 2 c4 and indexer layers, 2 c128.
  EXPECT_EQ(written_words(out.at("swa_pool")), 5 * swa_rows * 584 / 4);
  EXPECT_EQ(written_words(out.at("c4_pool")), 2 * c4_rows * 584 / 4);
  EXPECT_EQ(written_words(out.at("indexer_pool")), 2 * c4_rows * 132 / 4);
  EXPECT_EQ(written_words(out.at("c128_pool")), 2 * c128_rows * 584 / 4);
  // Row 0's swa entry of layer 0 unpacks to its latent within fp8 rounding, at its slot's page.
  const int32_t slot = out.at("swa_out_loc").data<int32_t>()[0];
  if (slot > 0) {
    const uint8_t* page = out.at("swa_pool").bytes() + slot / 64 * reference::model1_page_bytes(64);
    std::vector<uint16_t> back(512);
    reference::model1_unpack_token(page, 64, slot % 64, back.data());
    const HostTensor& kv = run.inputs.at("kv");
    for (int d = 448; d < 512; ++d) EXPECT_EQ(back[d], kv.data<uint16_t>()[d]) << "rope dim " << d;
  }
}

TEST(MemoryPoolComponent, TheStoreOrderChangesNothing) {
  const std::string base = "memory_pool(tokens=33,per_request=3,layers=6,full_pages=64,swa_pages=40";
  const CaseRun up = run_case(pool(), parse_case(base + ",order=0)", 9), nullptr);
  const CaseRun down = run_case(pool(), parse_case(base + ",order=1)", 9), nullptr);
  const CaseRun shuffled = run_case(pool(), parse_case(base + ",order=2)", 9), nullptr);
  for (const auto& [name, t] : up.outputs.at("reference")) {
    EXPECT_EQ(std::memcmp(t.bytes(), down.outputs.at("reference").at(name).bytes(), t.nbytes()), 0) << name;
    EXPECT_EQ(std::memcmp(t.bytes(), shuffled.outputs.at("reference").at(name).bytes(), t.nbytes()), 0) << name;
  }
}

// A kernel may store its padded rows into the sink (spec 5.2, issue 4: "padded rows go to slot 0
// only"): slot 0 of every pool, data and scale bytes, is unchecked, and not one word more.
TEST(MemoryPoolComponent, TheSinkSlotAndNothingElseIsUnchecked) {
  const Case c = parse_case("memory_pool(tokens=8,layers=3,history=40,swa_page=16,full_pages=16,swa_pages=32)", 4);
  const CaseRun run = run_case(pool(), c, nullptr);
  ASSERT_TRUE(run.result.passed()) << run.result.report();
  const TensorMap& reference = run.outputs.at("reference");
  const auto compare_with = [&](const std::string& name, int64_t word) {
    TensorMap got = reference;
    got.at(name).data<int32_t>()[word] = 12345;  // a padded row's store
    mask_unchecked(pool(), c, got, Poison::a);
    return compare_output(name, reference.at(name), Poison::a, got.at(name), Poison::a, OutputCheck{});
  };
  // Page sections of the last layer of each pool: data of slot 0 at word 0, its scales after the
  // page's data section (16 SWA entries, 64 c4 / indexer entries, 2 c128 entries a page).
  const int64_t swa_row = reference.at("swa_pool").shape()[1] * 2, c4_row = 0;
  EXPECT_TRUE(compare_with("swa_pool", swa_row).passed());
  EXPECT_TRUE(compare_with("swa_pool", swa_row + 16 * 576 / 4 + 1).passed());      // slot 0's second scale word
  EXPECT_FALSE(compare_with("swa_pool", swa_row + 576 / 4).passed());              // slot 1's data
  EXPECT_FALSE(compare_with("swa_pool", swa_row + 16 * 576 / 4 + 2).passed());     // slot 1's scales
  EXPECT_TRUE(compare_with("c4_pool", c4_row + 143).passed());                     // slot 0's last data word
  EXPECT_FALSE(compare_with("c4_pool", c4_row + 144).passed());
  EXPECT_TRUE(compare_with("indexer_pool", 64 * 128 / 4).passed());                 // slot 0's scale
  EXPECT_FALSE(compare_with("indexer_pool", 64 * 128 / 4 + 1).passed());
  EXPECT_TRUE(compare_with("c128_pool", 2 * 576 / 4 + 1).passed());
  EXPECT_FALSE(compare_with("c128_pool", 2 * 576 / 4 + 2).passed());
}

std::string bad_input_message(const std::string& text, const std::string& input, int64_t index, int32_t value) {
  const Case c = parse_case(text, 5);
  TensorMap inputs = pool().make_inputs(c);
  inputs.at(input).data<int32_t>()[index] = value;
  const CaseRun run = run_case(pool(), c, nullptr, inputs);
  EXPECT_EQ(run.result.status, CaseStatus::bad_input) << run.result.report();
  EXPECT_TRUE(run.outputs.empty()) << "nothing may be written on bad input";
  return run.result.message;
}

TEST(MemoryPoolComponent, BadInputsNameTheValue) {
  const std::string c = "memory_pool(tokens=8,full_pages=32,swa_pages=16)";
  EXPECT_NE(bad_input_message(c, "out_cache_loc", 3, 32 * 256).find("out_cache_loc[3] = 8192 is outside the full pool"), std::string::npos);
  EXPECT_NE(bad_input_message(c, "out_cache_loc", 2, -7).find("out_cache_loc[2] = -7"), std::string::npos);
  EXPECT_NE(bad_input_message(c, "full_to_swa", 300, 16 * 256).find("full_to_swa[300] = 4096 (swa page 16) is outside"), std::string::npos);
  EXPECT_NE(bad_input_message(c, "seq_lens", 0, 0).find("seq_lens[0] = 0"), std::string::npos);
  // Two tokens completing a C4 block at one compressed slot (8 / 4 and 9 / 4): the GPU's stores
  // would race, so the case is refused.
  {
    const Case collide = parse_case(c, 5);
    TensorMap inputs = pool().make_inputs(collide);
    int32_t* loc = inputs.at("out_cache_loc").data<int32_t>();
    int32_t* len = inputs.at("seq_lens").data<int32_t>();
    for (int64_t i = 0; i < 8; ++i) loc[i] = -1;
    loc[0] = 8, len[0] = 4, loc[1] = 9, len[1] = 8;
    const CaseRun run = run_case(pool(), collide, nullptr, inputs);
    EXPECT_EQ(run.result.status, CaseStatus::bad_input) << run.result.report();
    EXPECT_NE(run.result.message.find("rows 0 and 1 both store to c4 slot 2"), std::string::npos) << run.result.message;
  }
  {
    const Case c8 = parse_case(c, 5);
    TensorMap inputs = pool().make_inputs(c8);
    const int32_t* loc = inputs.at("out_cache_loc").data<int32_t>();
    int64_t stored = 0;
    while (loc[stored] <= 0) ++stored;  // the first row that stores
    inputs.at("kv").set(stored * 512 + 7, INFINITY);
    const CaseRun run = run_case(pool(), c8, nullptr, inputs);
    EXPECT_EQ(run.result.status, CaseStatus::bad_input) << run.result.report();
    EXPECT_NE(run.result.message.find("kv[0, " + std::to_string(stored) + ", 7] = inf"), std::string::npos)
        << run.result.message;
  }
  try {
    pool().make_inputs(parse_case("memory_pool(tokens=20,full_pages=4)", 1));
    FAIL() << "no error";
  } catch (const BadInput& e) {
    EXPECT_NE(std::string(e.what()).find("pool too small"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dsv4h
