// The attention metadata reference (spec 6.2) against the spec's docstring example, literal values
// at the seq_len boundaries of the C4 and C128 blocks and the SWA window, the row layouts of
// prefill, target verify and draft decode, and the partial-batch copy with its tail reset (6.4).
#include <gtest/gtest.h>

#include "metadata_pool.h"

namespace dsv4h::reference {
namespace {

using dsv4h::testing::column;
using dsv4h::testing::metadata_pool;

// One decode row per request of `seq_lens`, each in its own pool slot.
StepInputs decode_step(StepInputs pool, std::vector<int32_t> seq_lens, std::vector<int32_t> out_locs) {
  std::vector<int32_t> reqs(seq_lens.size());
  for (size_t r = 0; r < reqs.size(); ++r) reqs[r] = static_cast<int32_t>(r);
  pool.req_pool_indices = column(reqs);
  pool.seq_lens = column(seq_lens);
  pool.extend_lens = column(std::vector<int32_t>(seq_lens.size(), 1));
  pool.out_cache_loc = column(out_locs);
  pool.num_reqs = static_cast<int64_t>(seq_lens.size());
  return pool;
}

TEST(AttnMetadataReference, DocstringExampleOfTheC4Fields) {
  const int32_t n = 9, X = 1000, Y = 2000;
  const StepInputs in = decode_step(metadata_pool(4, 512, 1), {4 * n - 1, 4 * n, 4 * n + 1, 4 * n + 2},
                                    {4 * X + 2, 4 * X + 3, 4 * Y, 4 * Y + 1});
  const AttnMetadata m = build_attn_metadata(in, MetadataWidths::for_seq_len(512, 512));
  EXPECT_EQ(m.c4_topk_lengths_raw, column({n - 1, n, n, n}));
  EXPECT_EQ(m.c4_positions(1, 0), 4 * n - 4);
  EXPECT_EQ(m.c4_out_loc, column({0, X, 0, 0}));
}

// Literal values per seq_len L, with raw_out_loc = 2^20 (a multiple of 4 and 128).
struct Boundary {
  int32_t L, swa_len, c4_pos, c4_raw, c4_sparse, c4_out, c128_pos, c128_clamp1, c128_out;
};

TEST(AttnMetadataReference, ScalarFieldsAtSeqLenBoundaries) {
  const int32_t raw = 1 << 20;
  const Boundary cases[] = {
      {1, 1, 0, 0, 1, 0, 0, 1, 0},           {3, 3, 0, 0, 1, 0, 0, 1, 0},
      {4, 4, 0, 1, 1, raw / 4, 0, 1, 0},     {5, 5, 4, 1, 1, 0, 0, 1, 0},
      {127, 127, 124, 31, 31, 0, 0, 1, 0},   {128, 128, 124, 32, 32, raw / 4, 0, 1, raw / 128},
      {129, 128, 128, 32, 32, 0, 128, 1, 0}, {255, 128, 252, 63, 63, 0, 128, 1, 0},
      {256, 128, 252, 64, 64, raw / 4, 128, 2, raw / 128}, {257, 128, 256, 64, 64, 0, 256, 2, 0},
      {511, 128, 508, 127, 127, 0, 384, 3, 0}, {512, 128, 508, 128, 128, raw / 4, 384, 4, raw / 128},
      {513, 128, 512, 128, 128, 0, 512, 4, 0}, {2052, 128, 2048, 513, 512, raw / 4, 2048, 16, 0},
      {524287, 128, 524284, 131071, 512, 0, 524160, 4095, 0},
      {524288, 128, 524284, 131072, 512, raw / 4, 524160, 4096, raw / 128},
      {524289, 128, 524288, 131072, 512, 0, 524288, 4096, 0},
  };
  const int64_t ctx = 524289;
  const StepInputs pool = metadata_pool(1, ctx, 2);
  for (const Boundary& b : cases) {
    SCOPED_TRACE("seq_len " + std::to_string(b.L));
    const AttnMetadata m = build_attn_metadata(decode_step(pool, {b.L}, {raw}), MetadataWidths::for_seq_len(ctx, 512));
    EXPECT_EQ(m.seq_lens_casual(0, 0), b.L);
    EXPECT_EQ(m.positions_casual(0, 0), b.L - 1);
    EXPECT_EQ(m.raw_out_loc(0, 0), raw);
    EXPECT_EQ(m.swa_topk_lengths(0, 0), b.swa_len);
    EXPECT_EQ(m.c4_positions(0, 0), b.c4_pos);
    EXPECT_EQ(m.c4_topk_lengths_raw(0, 0), b.c4_raw);
    EXPECT_EQ(m.c4_topk_lengths_clamp1(0, 0), std::max(b.c4_raw, 1));
    EXPECT_EQ(m.c4_sparse_topk_lengths(0, 0), b.c4_sparse);
    EXPECT_EQ(m.c4_out_loc(0, 0), b.c4_out);
    EXPECT_EQ(m.c128_positions(0, 0), b.c128_pos);
    EXPECT_EQ(m.c128_topk_lengths_clamp1(0, 0), b.c128_clamp1);
    EXPECT_EQ(m.c128_out_loc(0, 0), b.c128_out);
    EXPECT_TRUE((m.c4_sparse_page_indices.array() == -1).all());
    // Index arrays, read from the other side: the slot each valid column names, then -1.
    const int64_t p = b.L - 1;
    for (int64_t k = 0; k < kSwaWindow; ++k)
      ASSERT_EQ(m.swa_page_indices(0, k), k <= p ? pool.full_to_swa(pool.req_to_token(0, p - k), 0) : -1) << k;
    const int64_t c128_valid = b.L / 128;
    for (int64_t j = 0; j < m.c128_page_indices.cols(); ++j) {
      const int32_t first_token = pool.req_to_token(0, std::min<int64_t>(128 * j, ctx - 1));
      ASSERT_EQ(m.c128_page_indices(0, j), j < c128_valid ? first_token / 128 : -1) << j;
    }
    EXPECT_EQ(m.c128_page_indices.cols() % 64, 0);
    for (int64_t c = 0; c < m.page_table.cols(); ++c) ASSERT_EQ(m.page_table(0, c) * 256, pool.req_to_token(0, 256 * c));
  }
}

TEST(AttnMetadataReference, PrefillVerifyAndDraftRowLayouts) {
  StepInputs in = metadata_pool(6, 1024, 3);
  in.req_pool_indices = column({4, 1});
  in.out_cache_loc = column({11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22});
  in.num_reqs = 2;
  const MetadataWidths widths = MetadataWidths::for_seq_len(1024, 512);

  in.seq_lens = column({8, 130});  // prefill: prefix 5 + 3 new tokens, then prefix 127 + 3
  in.extend_lens = column({3, 3});
  AttnMetadata m = build_attn_metadata(in, widths);
  EXPECT_EQ(m.seq_lens_casual, column({6, 7, 8, 128, 129, 130}));
  EXPECT_EQ(m.raw_out_loc, column({11, 12, 13, 14, 15, 16}));
  EXPECT_EQ(m.swa_page_indices(4, 0), in.full_to_swa(in.req_to_token(1, 128), 0));

  in.seq_lens = column({10, 4});  // target verify, num_draft 4: seq_lens already include the drafts
  in.extend_lens = column({4, 4});
  m = build_attn_metadata(in, widths);
  EXPECT_EQ(m.seq_lens_casual, column({7, 8, 9, 10, 1, 2, 3, 4}));
  EXPECT_EQ(m.swa_topk_lengths, column({7, 8, 9, 10, 1, 2, 3, 4}));

  in.seq_lens = column({10, 4});  // draft decode, topk 3: request-major, each row its own out slot
  in.extend_lens = column({1, 1});
  in.row_repeat = 3;
  m = build_attn_metadata(in, widths);
  EXPECT_EQ(m.seq_lens_casual, column({10, 10, 10, 4, 4, 4}));
  EXPECT_EQ(m.raw_out_loc, column({11, 12, 13, 14, 15, 16}));
  EXPECT_EQ(m.swa_page_indices.row(2), m.swa_page_indices.row(0));
  EXPECT_EQ(m.swa_page_indices.row(3), m.swa_page_indices.row(5));
  EXPECT_NE(m.swa_page_indices.row(2), m.swa_page_indices.row(3));
}

TEST(AttnMetadataReference, CopyIntoResetsTailRowsAndNarrowColumns) {
  StepInputs in = decode_step(metadata_pool(3, 1024, 4), {300, 5, 700}, {1028, 2048, 4096});
  const AttnMetadata temp = build_attn_metadata(in, MetadataWidths::for_seq_len(700, 512));  // 3 pages
  const MetadataWidths capture = MetadataWidths::for_seq_len(1024, 512);                     // 4 pages
  AttnMetadata buffers = build_attn_metadata(decode_step(metadata_pool(8, 1024, 5), {9, 9, 9, 9, 9, 9, 9, 9},
                                                         {4, 8, 12, 16, 20, 24, 28, 32}),
                                             capture);  // stale rows of an earlier, larger batch
  copy_into(buffers, temp);
  const AttnMetadata pad = padding_metadata(8, capture);
  for (const MetadataField& f : kMetadataFields) {
    SCOPED_TRACE(f.name);
    const IndexMatrix& got = buffers.*f.member;
    const IndexMatrix& src = temp.*f.member;
    EXPECT_EQ(got.topLeftCorner(3, src.cols()), src);
    EXPECT_TRUE((got.bottomRows(5).array() == f.padding).all());
    EXPECT_TRUE((got.rightCols(got.cols() - src.cols()).array() == f.padding).all());
    EXPECT_EQ(got.bottomRows(5), (pad.*f.member).bottomRows(5));
  }
  EXPECT_EQ(buffers.seq_lens_casual, column({300, 5, 700, 1, 1, 1, 1, 1}));
  EXPECT_EQ(buffers.raw_out_loc, column({1028, 2048, 4096, 0, 0, 0, 0, 0}));

  AttnMetadata small = padding_metadata(2, capture);
  EXPECT_THROW(copy_into(small, temp), std::invalid_argument);  // 3 rows into a bucket of 2
  AttnMetadata narrow = padding_metadata(4, MetadataWidths::for_seq_len(256, 512));
  EXPECT_THROW(copy_into(narrow, temp), std::invalid_argument);  // page_table 3 wide into 1
}

TEST(AttnMetadataReference, PaddingRowIsTheFormulaAtSeqLenOne) {
  const MetadataWidths widths = MetadataWidths::for_seq_len(512, 512);
  const AttnMetadata pad = padding_metadata(1, widths);
  const AttnMetadata one = build_attn_metadata(decode_step(metadata_pool(1, 512, 6), {1}, {0}), widths);
  for (const char* same : {"raw_out_loc", "seq_lens_casual", "positions_casual", "swa_topk_lengths", "c4_out_loc",
                           "c4_positions", "c4_topk_lengths_raw", "c4_topk_lengths_clamp1", "c4_sparse_topk_lengths",
                           "c4_sparse_page_indices", "c128_out_loc", "c128_positions", "c128_topk_lengths_clamp1",
                           "c128_page_indices"})
    for (const MetadataField& f : kMetadataFields) {
      if (std::string(f.name) != same) continue;
      EXPECT_EQ(pad.*f.member, one.*f.member) << same;
    }
}

TEST(AttnMetadataReference, RequestRowsDoNotDependOnTheirPlaceInTheBatch) {
  const StepInputs pool = metadata_pool(4, 1024, 7);
  const MetadataWidths widths = MetadataWidths::for_seq_len(1024, 512);
  const auto rows_of = [&](std::vector<int32_t> reqs, size_t place) {
    StepInputs in = pool;
    std::vector<int32_t> lens, outs;
    for (int32_t r : reqs) lens.push_back(100 + 157 * r), outs.push_back(8 * r + 4);
    in.req_pool_indices = column(reqs);
    in.seq_lens = column(lens);
    in.extend_lens = column(std::vector<int32_t>(reqs.size(), 1));
    in.out_cache_loc = column(outs);
    in.num_reqs = static_cast<int64_t>(reqs.size());
    const AttnMetadata m = build_attn_metadata(in, widths);
    std::vector<IndexMatrix> rows;
    for (const MetadataField& f : kMetadataFields) rows.push_back((m.*f.member).row(static_cast<int64_t>(place)));
    return rows;
  };
  const auto alone = rows_of({2}, 0);
  EXPECT_EQ(rows_of({2, 0, 1}, 0), alone);
  EXPECT_EQ(rows_of({0, 2, 3}, 1), alone);
  EXPECT_EQ(rows_of({3, 1, 2}, 2), alone);
}

TEST(AttnMetadataReference, RefusesIndicesOutsideThePoolAndLengthsBeyondIt) {
  const MetadataWidths widths = MetadataWidths::for_seq_len(512, 512);
  StepInputs in = decode_step(metadata_pool(2, 512, 8), {10, 20}, {1, 2});
  in.req_pool_indices(1, 0) = 2;
  EXPECT_THROW(build_attn_metadata(in, widths), std::invalid_argument);
  in = decode_step(metadata_pool(2, 512, 8), {10, 513}, {1, 2});
  EXPECT_THROW(build_attn_metadata(in, widths), std::invalid_argument);
  in = decode_step(metadata_pool(2, 512, 8), {10, 0}, {1, 2});
  EXPECT_THROW(build_attn_metadata(in, widths), std::invalid_argument);
}

}  // namespace
}  // namespace dsv4h::reference
