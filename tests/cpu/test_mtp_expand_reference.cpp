// The MTP expansion reference (spec 7): request-major repeat_interleave with the output size given,
// and, for every field, the same rows as building the draft-decode metadata directly.
#include <gtest/gtest.h>

#include "metadata_pool.h"
#include "reference/mtp_expand.h"

namespace dsv4h::reference {
namespace {

using dsv4h::testing::column;

TEST(MtpExpandReference, RepeatsEachRequestRowInPlace) {
  IndexMatrix per_request(3, 2);
  per_request << 1, 2, 3, 4, 5, 6;
  IndexMatrix expected(6, 2);
  expected << 1, 2, 1, 2, 3, 4, 3, 4, 5, 6, 5, 6;
  EXPECT_EQ(repeat_interleave(per_request, 2, 6), expected);
  EXPECT_EQ(repeat_interleave(per_request, 1, 3), per_request);
  EXPECT_EQ(repeat_interleave(IndexMatrix(0, 2), 4, 0).rows(), 0);
}

TEST(MtpExpandReference, RefusesTopkZeroAndAWrongOutputSize) {
  const IndexMatrix per_request = column({1, 2});
  EXPECT_THROW(repeat_interleave(per_request, 0, 0), std::invalid_argument);
  EXPECT_THROW(repeat_interleave(per_request, 2, 3), std::invalid_argument);
  EXPECT_THROW(repeat_interleave(per_request, 2, 5), std::invalid_argument);
}

TEST(MtpExpandReference, ExpandedDecodeMetadataIsTheDraftDecodeMetadata) {
  for (int64_t topk : {1, 2, 3, 4}) {
    SCOPED_TRACE("topk " + std::to_string(topk));
    StepInputs in = dsv4h::testing::metadata_pool(5, 1024, 11);
    in.req_pool_indices = column({3, 0, 4});
    in.seq_lens = column({1, 129, 1024});
    in.extend_lens = column({1, 1, 1});
    in.num_reqs = 3;
    in.out_cache_loc = column({40, 80, 120});
    const MetadataWidths widths = MetadataWidths::for_seq_len(1024, 512);
    const AttnMetadata expanded = expand_for_mtp(build_attn_metadata(in, widths), topk, 3 * topk);
    in.out_cache_loc = repeat_interleave(in.out_cache_loc, topk, 3 * topk);
    in.row_repeat = topk;
    const AttnMetadata direct = build_attn_metadata(in, widths);
    for (const MetadataField& f : kMetadataFields) EXPECT_EQ(expanded.*f.member, direct.*f.member) << f.name;
  }
}

}  // namespace
}  // namespace dsv4h::reference
