// The host side of the model's batched decode (model/decode_batch.h, issue 31): the bucket a batch
// replays, the padding rows of a step's inputs (spec 6.4), and the shared pools' layout, checked
// against the attention metadata the step builds from it (reference/attn_metadata.h): every pool's
// slot of a request's position or entry is the one the eager GPU forward uses for that request.
#include <gtest/gtest.h>

#include <stdexcept>

#include "model/decode_batch.h"
#include "reference/attn_metadata.h"

namespace dsv4h {
namespace {

using model::DecodeRow;
using model::SharedPoolLayout;
using reference::IndexMatrix;

TEST(ModelDecodeBatch, BucketsAndTheBucketOfABatch) {
  EXPECT_EQ(model::decode_buckets(8), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(model::decode_buckets(3), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(model::decode_buckets(1), (std::vector<int64_t>{1}));
  EXPECT_EQ(model::decode_buckets(30), (std::vector<int64_t>{1, 2, 4, 8, 16, 24, 30}));
  const std::vector<int64_t> b = model::decode_buckets(8);
  EXPECT_EQ(model::bucket_for(b, 1), 1);
  EXPECT_EQ(model::bucket_for(b, 3), 4);
  EXPECT_EQ(model::bucket_for(b, 5), 8);
  EXPECT_EQ(model::bucket_for(b, 8), 8);
  EXPECT_THROW(model::bucket_for(b, 9), std::invalid_argument);
  EXPECT_THROW(model::bucket_for(b, 0), std::invalid_argument);
  EXPECT_THROW(model::decode_buckets(0), std::invalid_argument);
}

TEST(ModelDecodeBatch, RealRowsThenPaddingRows) {
  const SharedPoolLayout layout = SharedPoolLayout::for_requests(3, 300);
  EXPECT_EQ(layout.ctx, 512);
  EXPECT_EQ(layout.full_pages(), 7);
  const model::DecodeStepInputs in = model::decode_step_inputs({{2, 299, 17, 5}, {0, 4, 9, -1}}, 4, layout);
  EXPECT_EQ(in.real, 2);
  EXPECT_EQ(in.tokens, (std::vector<int32_t>{17, 9, 0, 0}));
  EXPECT_EQ(in.next_tokens, (std::vector<int32_t>{5, 0, 0, 0}));
  EXPECT_EQ(in.req_pool_indices, (std::vector<int32_t>{2, 0, 0, 0}));
  EXPECT_EQ(in.seq_lens, (std::vector<int32_t>{300, 5, 1, 1}));
  EXPECT_EQ(in.out_cache_loc, (std::vector<int32_t>{(5 + 1) * 256 + 43, 256 + 4, 0, 0}));
  EXPECT_EQ(in.extend_lens, (std::vector<int32_t>{1, 1, 0, 0}));
  EXPECT_EQ(in.ring_index, (std::vector<int32_t>{3, 1, 0, 0}));
  EXPECT_THROW(model::decode_step_inputs({{0, 1, 1, 1}, {1, 1, 1, 1}}, 1, layout), std::invalid_argument);
  EXPECT_THROW(model::decode_step_inputs({{3, 1, 1, 1}}, 1, layout), std::invalid_argument);
  EXPECT_THROW(model::decode_step_inputs({{0, 512, 1, 1}}, 1, layout), std::invalid_argument);
}

// The metadata a step's inputs give over the layout (as the GPU step builds it: full_to_swa the
// identity, one token a request).
reference::AttnMetadata metadata_of(const SharedPoolLayout& layout, const model::DecodeStepInputs& step) {
  reference::StepInputs in;
  const std::vector<int32_t> table = layout.req_to_token();
  in.req_to_token = Eigen::Map<const IndexMatrix>(table.data(), layout.requests, layout.ctx);
  in.full_to_swa.resize(layout.full_pages() * 256, 1);
  for (int64_t s = 0; s < in.full_to_swa.rows(); ++s) in.full_to_swa(s, 0) = static_cast<int32_t>(s);
  const auto column = [](const std::vector<int32_t>& v) { return Eigen::Map<const IndexMatrix>(v.data(), static_cast<int64_t>(v.size()), 1); };
  in.req_pool_indices = column(step.req_pool_indices);
  in.seq_lens = column(step.seq_lens);
  in.extend_lens = IndexMatrix::Ones(static_cast<int64_t>(step.seq_lens.size()), 1);
  in.out_cache_loc = column(step.out_cache_loc);
  in.num_reqs = step.real;
  return reference::build_attn_metadata(in, reference::MetadataWidths::for_seq_len(layout.ctx, 512));
}

// The metadata of a step over the layout: the window's slots, the page table, and the C4 and C128
// locations are each pool's slot of the request's position or entry at the request's first page.
TEST(ModelDecodeBatch, MetadataOfTheLayoutAddressesEachRequestsPages) {
  const SharedPoolLayout layout = SharedPoolLayout::for_requests(3, 600);
  const std::vector<DecodeRow> rows = {{1, 127, 3, 4}, {2, 511, 5, -1}, {0, 3, 7, 8}};
  const reference::AttnMetadata m = metadata_of(layout, model::decode_step_inputs(rows, 4, layout));
  ASSERT_EQ(m.rows(), 3);
  for (int64_t i = 0; i < 3; ++i) {
    const DecodeRow& r = rows[static_cast<size_t>(i)];
    const int64_t first = layout.first_page(r.request), L = r.position + 1;
    for (int64_t c = 0; c < layout.pages_per_request(); ++c) EXPECT_EQ(m.page_table(i, c), first + c);
    for (int64_t k = 0; k < std::min<int64_t>(L, 128); ++k) EXPECT_EQ(m.swa_page_indices(i, k), layout.full_slot(r.request, r.position - k));
    // The entry a token completes, at the eager forward's slot of that entry (page_entries * first + j).
    EXPECT_EQ(m.c4_out_loc(i, 0), L % 4 == 0 ? first * 64 + L / 4 - 1 : 0) << i;
    EXPECT_EQ(m.c128_out_loc(i, 0), L % 128 == 0 ? first * 2 + L / 128 - 1 : 0) << i;
    for (int64_t j = 0; j < L / 128; ++j) EXPECT_EQ(m.c128_page_indices(i, j), first * 2 + j);
  }
}

// The scenario of the model mutant meta_full_shape_copy (tests/gpu/model_mutant_check.cpp): a
// request finishes and the rows after it move up, so the bucket's last real row of the step before
// is a padding row now. Reset (copy_into), it stores at the sink; left as the earlier replay built
// it, it stores at a slot of a live request that this step's window of that request reads: the
// batch's attention sees it, and bisection names layers.0.attn.attend.
TEST(ModelDecodeBatch, AStaleTailRowWouldStoreIntoALiveRequestsWindow) {
  const SharedPoolLayout layout = SharedPoolLayout::for_requests(7, 19);
  std::vector<DecodeRow> before, now;
  for (int64_t r = 0; r < 7; ++r) before.push_back({r, 6, 1, 2});   // step 2 of prompt 5: position 6
  for (int64_t r = 1; r < 7; ++r) now.push_back({r, 7, 1, 2});       // step 3: request 0 has finished
  const reference::AttnMetadata stale = metadata_of(layout, model::decode_step_inputs(before, 8, layout));
  reference::AttnMetadata buffers = reference::padding_metadata(8, reference::MetadataWidths::for_seq_len(layout.ctx, 512));
  reference::copy_into(buffers, stale);
  reference::copy_into(buffers, metadata_of(layout, model::decode_step_inputs(now, 8, layout)));
  EXPECT_EQ(buffers.raw_out_loc(6, 0), 0) << "the tail row reset to the sink";
  const int32_t stale_slot = stale.raw_out_loc(6, 0);
  EXPECT_EQ(stale_slot, layout.full_slot(6, 6));
  // Request 6 is row 5 now: its window holds the slot the stale row would overwrite.
  bool read = false;
  for (int64_t k = 0; k < buffers.swa_topk_lengths(5, 0); ++k) read |= buffers.swa_page_indices(5, k) == stale_slot;
  EXPECT_TRUE(read);
}

}  // namespace
}  // namespace dsv4h
