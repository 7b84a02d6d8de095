// The composed C4 decode step on the CPU (harness/components/c4_decode_step.cpp): its reference is
// its stages' references run by hand in order, each on the tensors the step wires to it; the wiring
// means what the descriptor says (the slot an emitted entry is packed at is its index translated
// through the metadata's page table; the real rows store to distinct SWA slots); and each stage's
// mutant, as its reference computes the bug, breaks the step under the step's own checks on one of
// its verify cases.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "harness/component.h"
#include "harness/components/compressor.h"
#include "harness/compare.h"
#include "harness/poison.h"
#include "harness/verify.h"
#include "reference/compressor.h"
#include "reference/indexer.h"
#include "reference/kv_pool.h"

namespace dsv4h {

Component c4_decode_step_over(const std::map<std::string, Component>& replaced);

namespace {

const Component& step() { return registry().get("c4_decode_step"); }

// The step's tensors "<prefix>.X" as X.
TensorMap unprefixed(const TensorMap& tensors, const std::string& prefix) {
  TensorMap out;
  for (const auto& [name, t] : tensors)
    if (name.rfind(prefix + ".", 0) == 0) out.emplace(name.substr(prefix.size() + 1), t);
  return out;
}

// A metadata field [rows, 1] as the per-row vector [rows] a later stage reads.
HostTensor column(const HostTensor& t) {
  HostTensor flat(t.dtype(), {t.numel()});
  std::memcpy(flat.bytes(), t.bytes(), t.nbytes());
  return flat;
}

void expect_bitwise_equal(const TensorMap& want, const TensorMap& got, const std::string& what) {
  ASSERT_EQ(want.size(), got.size()) << what;
  for (const auto& [name, w] : want) {
    ASSERT_TRUE(got.count(name)) << what << " lacks " << name;
    const HostTensor& g = got.at(name);
    ASSERT_EQ(w.shape(), g.shape()) << what << " " << name;
    ASSERT_EQ(std::memcmp(w.bytes(), g.bytes(), w.nbytes()), 0) << what << " " << name << " differs";
  }
}

std::string arg(const Case& c, const char* name) { return std::string(name) + "=" + std::to_string(c.integer(name)); }

int64_t full_pages(const Case& c) { return c.integer("pool") * ((c.integer("ctx") + 255) / 256) + 1; }

TEST(C4DecodeStepReference, IsItsStagesRunByHand) {
  for (const char* text : {"c4_decode_step(bs=8,real=5,pool=8,ctx=512,index_topk=64,heads=4,seed=3)",
                           "c4_decode_step(bs=6,real=4,pool=7,ctx=1024,max_seq_len=700,index_topk=64,heads=4,dims=128,temp=1,seed=5)"}) {
    SCOPED_TRACE(text);
    const Case c = parse_case(text);
    const TensorMap inputs = step().make_inputs(c);
    const TensorMap outputs = reference_outputs(step(), c, inputs, Poison::a);
    const auto stage_case = [&](const std::string& s) { return parse_case(s, c.seed()); };
    const std::string pages = std::to_string(full_pages(c));

    const Component& meta = registry().get("attn_metadata");
    const Case meta_case = stage_case("attn_metadata(" + arg(c, "bs") + "," + arg(c, "real") + ",mode=0," + arg(c, "ctx") + "," +
                                      arg(c, "max_seq_len") + "," + arg(c, "index_topk") + "," + arg(c, "pool") + "," +
                                      arg(c, "swa_slots") + "," + arg(c, "temp") + ",swa_distinct=1)");
    const TensorMap meta_in = unprefixed(inputs, "meta");
    expect_bitwise_equal(meta.make_inputs(meta_case), meta_in, "meta inputs");
    const TensorMap meta_out = reference_outputs(meta, meta_case, meta_in, Poison::a);
    expect_bitwise_equal(meta_out, unprefixed(outputs, "meta"), "meta stage");

    const Component& pool = registry().get("memory_pool");
    const Case pool_case = stage_case("memory_pool(tokens=" + std::to_string(c.integer("bs")) +
                                      ",layers=3,per_request=1,history=0,swa_page=1,window=1,full_pages=" + pages +
                                      ",swa_pages=" + std::to_string(c.integer("swa_slots")) + ",invalid=0)");
    TensorMap pool_in = unprefixed(inputs, "pool");
    pool_in.emplace("full_to_swa", meta_in.at("full_to_swa"));
    pool_in.emplace("out_cache_loc", column(meta_out.at("raw_out_loc")));
    pool_in.emplace("seq_lens", column(meta_out.at("seq_lens_casual")));
    expect_bitwise_equal(reference_outputs(pool, pool_case, pool_in, Poison::a), unprefixed(outputs, "pool"), "pool stage");

    const Component& compressor = registry().get("compressor");
    const Case compress_case = stage_case("compressor(ratio=4," + arg(c, "dims") + ",batch=" + std::to_string(c.integer("bs")) +
                                          ",tokens=1,start=8,slots=" + std::to_string(full_pages(c) * 64) + ")");
    TensorMap compress_in = unprefixed(inputs, "compress");
    compress_in.emplace("start", column(meta_out.at("positions_casual")));
    compress_in.emplace("out_loc", column(meta_out.at("c4_out_loc")));
    expect_bitwise_equal(reference_outputs(compressor, compress_case, compress_in, Poison::a), unprefixed(outputs, "compress"),
                         "compress stage");

    const Component& indexer = registry().get("indexer");
    const Case idx_case = stage_case("indexer(stage=0," + arg(c, "bs") + "," + arg(c, "ctx") + "," + arg(c, "heads") + "," +
                                     arg(c, "index_topk") + ",pool_pages=" + pages + ")");
    TensorMap idx_in = unprefixed(inputs, "idx");
    idx_in.emplace("positions", column(meta_out.at("positions_casual")));
    idx_in.emplace("page_table", meta_out.at("page_table"));
    expect_bitwise_equal(reference_outputs(indexer, idx_case, idx_in, Poison::a), unprefixed(outputs, "idx"), "idx stage");

    const Case translate_case = stage_case("indexer(stage=2," + arg(c, "bs") + "," + arg(c, "ctx") + "," + arg(c, "index_topk") + ")");
    TensorMap translate_in = unprefixed(inputs, "translate");
    translate_in.emplace("page_table", meta_out.at("page_table"));
    expect_bitwise_equal(reference_outputs(indexer, translate_case, translate_in, Poison::a), unprefixed(outputs, "translate"),
                         "translate stage");
  }
}

// A row whose token completes entry j = seq_len / 4 - 1 packs it at the metadata's c4_out_loc, which
// is j translated through the row's page table (topk_transform_512's arithmetic): the page table
// is the C4 page table, and the compressor's slots are the indexer's. The packed entry's page is
// written; the real rows store their latents to distinct SWA slots >= 1, the others to none.
TEST(C4DecodeStepWiring, AnEntrysSlotIsItsPageTranslationAndSwaSlotsAreDistinct) {
  int64_t emitted = 0;
  // The verify cases' real rows at seeds 1 and 2 by length: no entry yet (p + 1 < 4), the first
  // entry (4), within and past one C128 block (128, 129..), and a c4 length below, at and above
  // index_topk (the indexer takes every entry, then selects).
  std::map<std::string, int64_t> lengths;
  std::vector<Case> cases;
  for (uint64_t seed : {1, 2})
    for (const std::string& text : step().verify_cases) cases.push_back(parse_case(text, seed));
  for (const Case& c : cases) {
    SCOPED_TRACE(c.str());
    const TensorMap inputs = step().make_inputs(c);
    const TensorMap out = reference_outputs(step(), c, inputs, Poison::a);
    const int64_t bs = c.integer("bs"), real = inputs.at("meta.num_reqs").data<int32_t>()[0];
    const HostTensor& table = out.at("meta.page_table");
    const int64_t pages = table.shape()[1];
    const reference::CompressorConfig config{4, static_cast<int>(c.integer("dims"))};
    const int64_t page_bytes = reference::compressor_page_bytes(config);
    std::set<int32_t> swa_slots;
    for (int64_t r = 0; r < bs; ++r) {
      const int32_t seq_len = out.at("meta.seq_lens_casual").data<int32_t>()[r];
      const int64_t topk = c.integer("index_topk");
      if (r < real) {
        ++lengths[seq_len < 4 ? "p+1 < 4" : seq_len == 4 ? "p+1 = 4" : seq_len <= 128 ? "p+1 in (4, 128]" : "p+1 > 128"];
        ++lengths[seq_len / 4 < topk ? "c4 < topk" : seq_len / 4 == topk ? "c4 = topk" : "c4 > topk"];
      }
      const int32_t slot = out.at("meta.c4_out_loc").data<int32_t>()[r];
      const int32_t swa = out.at("pool.swa_out_loc").data<int32_t>()[r];
      if (r >= real) {
        EXPECT_EQ(slot, 0) << "row " << r;
        EXPECT_EQ(swa, 0) << "row " << r;
        continue;
      }
      EXPECT_GT(swa, 0) << "row " << r;
      EXPECT_TRUE(swa_slots.insert(swa).second) << "row " << r << " stores to SWA slot " << swa << " again";
      if (seq_len % 4) {
        EXPECT_EQ(slot, 0) << "row " << r;
        continue;
      }
      const std::vector<int32_t> translated =
          reference::c4_page_slots({seq_len / 4 - 1}, table.data<int32_t>() + r * pages, pages);
      EXPECT_EQ(slot, translated[0]) << "row " << r << ", seq_len " << seq_len;
      const HostTensor& pool = out.at("compress.pool");
      bool written = false;
      for (int64_t w = slot / 64 * page_bytes / 4; w < (slot / 64 + 1) * page_bytes / 4; ++w)
        written = written || !is_poison(pool, w, Poison::a);
      EXPECT_TRUE(written) << "row " << r << ": nothing packed in the page of slot " << slot;
      ++emitted;
    }
  }
  EXPECT_GT(emitted, 3) << "the verify cases complete too few blocks to show the wiring";
  for (const char* kind : {"p+1 < 4", "p+1 = 4", "p+1 in (4, 128]", "p+1 > 128", "c4 < topk", "c4 = topk", "c4 > topk"})
    EXPECT_GT(lengths[kind], 0) << "no real row with " << kind;
}

// The stage `name`'s component with its reference changed by `bug` after (or instead of) its run.
using Bug = std::function<void(const Component& real, const Case&, const TensorMap& in, TensorMap& out)>;

Component broken(const std::string& component, Bug bug) {
  Component b = registry().get(component);
  b.reference = [real = registry().get(component), bug](const Case& c, const TensorMap& in, TensorMap& out) { bug(real, c, in, out); };
  return b;
}

// The first verify case (seed 1) on which the step with `stage` replaced by `mutant` fails the
// step's checks on an output of that stage; "" where none does.
std::string caught_on(const std::string& stage, const Component& mutant) {
  const Component mutated = c4_decode_step_over({{stage, mutant}});
  for (const std::string& text : step().verify_cases) {
    const Case c = parse_case(text);
    const TensorMap inputs = step().make_inputs(c);
    TensorMap expected = reference_outputs(step(), c, inputs, Poison::a);
    // Not validated between the stages: a broken stage may hand on what the next one would refuse.
    TensorMap got = mutated.make_outputs(c);
    fill_poison(got, Poison::a);
    mutated.reference(c, inputs, got);
    const TensorMap scores = topk_scores(step(), c, inputs, expected);
    mask_unchecked(step(), c, expected, Poison::a);  // as the harness compares: what no reader looks at is not
    mask_unchecked(step(), c, got, Poison::a);
    for (const auto& [name, t] : expected) {
      if (name.rfind(stage + ".", 0) != 0) continue;
      const OutputCheck check = output_check(step(), c, name, t.dtype());
      if (!compare_output(name, t, Poison::a, got.at(name), Poison::a, check, &scores).passed()) return c.str();
    }
  }
  return "";
}

TEST(C4DecodeStepMutants, TheRightStagesBreakNothing) {
  for (const auto& [stage, component] : std::map<std::string, std::string>{
           {"meta", "attn_metadata"}, {"pool", "memory_pool"}, {"compress", "compressor"}, {"idx", "indexer"}, {"translate", "indexer"}})
    EXPECT_EQ(caught_on(stage, registry().get(component)), "") << stage;
}

TEST(C4DecodeStepMutants, EveryCompressorBugBreaksTheStep) {
  // Issue 29's compressor bugs as its reference computes them (compressor.h); in a decode step a chunk
  // "starting inside a block" is every token but a block's first.
  for (int bug = 1; bug <= 5; ++bug) {
    const Component mutant = broken("compressor", [bug](const Component&, const Case& c, const TensorMap& in, TensorMap& out) {
      compressor_reference_with_bug(c, in, out, static_cast<reference::CompressorBug>(bug));
    });
    EXPECT_NE(caught_on("compress", mutant), "") << "CompressorBug " << bug;
  }
}

TEST(C4DecodeStepMutants, IndexerMaskAndTopkBugsBreakTheStep) {
  // indexer_mask_off_by_one: j <= (p + 1) / 4, one more entry visible: the select stage reads a
  // position only for its visible count, so position + 4 is that mask (while the page table has it).
  const Component mask = broken("indexer", [](const Component& real, const Case& c, const TensorMap& in, TensorMap& out) {
    TensorMap shifted = in;
    const int64_t width = in.at("page_table").shape()[1] * 64;
    int32_t* p = shifted.at("positions").data<int32_t>();
    for (int64_t r = 0; r < shifted.at("positions").numel(); ++r)
      if ((p[r] + 5) / 4 <= width) p[r] += 4;
    real.reference(c, shifted, out);
  });
  EXPECT_NE(caught_on("idx", mask), "");
  // indexer_topk_padded_width: the top-k over every column of the scores, masked ones included.
  const Component padded = broken("indexer", [](const Component& real, const Case& c, const TensorMap& in, TensorMap& out) {
    real.reference(c, in, out);
    const HostTensor& scores = out.at("scores");
    HostTensor& topk = out.at("topk_indices");
    const int64_t rows = scores.shape()[0], width = scores.shape()[1], k = topk.shape()[1];
    for (int64_t r = 0; r < rows; ++r) {
      Eigen::VectorXd row(width);
      for (int64_t j = 0; j < width; ++j) row(j) = scores.get(r * width + j);
      const std::vector<int32_t> raw = reference::indexer_topk(row, width, k);
      std::memcpy(topk.data<int32_t>() + r * k, raw.data(), raw.size() * 4);
    }
  });
  EXPECT_NE(caught_on("idx", padded), "");
}

TEST(C4DecodeStepMutants, PagesOf128EntriesBreakTheTranslation) {
  const Component pages_128 = broken("indexer", [](const Component& real, const Case& c, const TensorMap& in, TensorMap& out) {
    real.reference(c, in, out);
    const HostTensor& raw = in.at("topk_indices");
    const int64_t rows = raw.shape()[0], k = raw.shape()[1], pages = in.at("page_table").shape()[1];
    for (int64_t i = 0; i < rows * k; ++i) {
      const int32_t index = raw.data<int32_t>()[i];
      const int32_t* table = in.at("page_table").data<int32_t>() + i / k * pages;
      out.at("page_indices").data<int32_t>()[i] = index < 0 ? -1 : table[index >> 7] * 128 + (index & 127);
    }
  });
  EXPECT_NE(caught_on("translate", pages_128), "");
}

TEST(C4DecodeStepMutants, MetadataRowZeroBroadcastAndStaleColumnsBreakTheStep) {
  // meta_row0_broadcast: the first row copied into every buffer row (torch's copy_ of a 1-row
  // source). meta_padding_item (a host read inside a capture), meta_full_shape_copy and
  // meta_tail_not_reset (what an earlier replay left in the buffers) and meta_missing_barrier (a
  // race of prefill) need a GPU, its graphs or its schedule.
  const Component row0 = broken("attn_metadata", [](const Component& real, const Case& c, const TensorMap& in, TensorMap& out) {
    real.reference(c, in, out);
    for (auto& [name, t] : out) {
      if (name.rfind("temp_", 0) == 0) continue;
      const int64_t cols = t.numel() / t.shape()[0];
      for (int64_t i = cols; i < t.numel(); ++i) t.set_bits(i, t.bits(i % cols));
    }
  });
  EXPECT_NE(caught_on("meta", row0), "");
  // meta_extra_columns_stale: the page table copied as dst[:n, :w] from a staging set of width w
  // (max_seq_len < ctx), the columns past w left as they were: poison, on a fresh run.
  const Component stale = broken("attn_metadata", [](const Component& real, const Case& c, const TensorMap& in, TensorMap& out) {
    real.reference(c, in, out);
    HostTensor& table = out.at("page_table");
    const int64_t rows = table.shape()[0], cols = table.shape()[1], narrow = out.at("temp_page_table").shape()[1];
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t col = narrow; col < cols; ++col) table.set_bits(r * cols + col, poison_bits(DType::i32, Poison::a));
  });
  EXPECT_NE(caught_on("meta", stale), "");
}

TEST(C4DecodeStepMutants, CachedSwaTranslationBreaksTheStep) {
  // pool_cached_loc: the layers after the first store at the translation an earlier step left
  // (stale_swa_loc: here the sink, the pool's requests holding no earlier token), so their SWA
  // entries of the step's rows are never written. pool_minus_one_wraparound cannot show here (the
  // metadata's out locations are never -1), and pool_scale_round_down is a kernel's rounding of
  // the FP8 scale, which the reference's one pack has no other way of doing.
  const Component cached = broken("memory_pool", [](const Component& real, const Case& c, const TensorMap& in, TensorMap& out) {
    real.reference(c, in, out);
    const int64_t swa_page = c.integer("swa_page");
    const int64_t per_page = reference::pool_tokens_per_page(reference::PoolKind::swa, swa_page);
    const int64_t page_bytes = reference::pool_page_bytes(reference::PoolKind::swa, swa_page);
    const int64_t data = reference::pool_entry_data_bytes(reference::PoolKind::swa);
    const int64_t scales = reference::pool_entry_bytes(reference::PoolKind::swa) - data;
    HostTensor& pool = out.at("swa_pool");
    const uint64_t poison = poison_bits(DType::i32, Poison::a);
    for (int64_t layer = 1; layer < pool.shape()[0]; ++layer)
      for (int64_t i = 0; i < out.at("swa_out_loc").numel(); ++i) {
        const int64_t slot = out.at("swa_out_loc").data<int32_t>()[i];
        if (slot <= 0) continue;
        const int64_t page = layer * pool.shape()[1] * 4 + slot / per_page * page_bytes, t = slot % per_page;
        for (int64_t b = 0; b < data; b += 4) pool.set_bits((page + t * data + b) / 4, poison);
        for (int64_t b = 0; b < scales; b += 4) pool.set_bits((page + per_page * data + t * scales + b) / 4, poison);
      }
  });
  EXPECT_NE(caught_on("pool", cached), "");
}

}  // namespace
}  // namespace dsv4h
