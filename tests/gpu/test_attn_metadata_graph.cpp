// attn_metadata and mtp_expand captured into graphs at the engine's bucket sizes and replayed at
// every batch size: each replay's buffers (real rows, tail reset to padding, staging rows nobody
// may write, the consumer's gather) equal the reference and, bit for bit, an eager launch on the
// same padded inputs; outputs are poisoned before every replay, so stale values cannot pass.
// With the engine's buckets a batch of 1 replays in a graph of 1; the coarse plans put it (and every
// batch up to 7) into a graph of 8, where a 1-row source broadcast to every row (review finding 2)
// would show. The temp=0 plans replay the update as an engine does (no staging set written), where
// the real rows come from registers alone.
#include <gtest/gtest.h>

#include <vector>

#include "gpu_env.h"
#include "harness/component.h"

namespace dsv4h {
namespace {

struct ReplayPlan {
  const char* base;
  int64_t max_batch;
  std::vector<int64_t> buckets = {};  // none: the engine's (default_buckets)
};

class MetadataGraph : public ::testing::TestWithParam<ReplayPlan> {};

TEST_P(MetadataGraph, ReplayAtEveryBatchSize) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Case base = parse_case(GetParam().base);
  const Component& component = registry().get(base.component());
  ReplayOptions options;
  options.max_batch = GetParam().max_batch;
  options.buckets = GetParam().buckets.empty() ? default_buckets(options.max_batch) : GetParam().buckets;
  const ReplayResult r = gpu->graph_replay(component, base, options);
  std::printf("%s: %lld batch sizes replayed, %lld failed\n", base.str().c_str(),
              static_cast<long long>(r.batches_checked), static_cast<long long>(r.batches_failed));
  EXPECT_EQ(r.batches_checked, options.max_batch);
  EXPECT_EQ(r.batches_failed, 0);
  for (const std::string& f : r.failures) ADD_FAILURE() << f;
}

// Beside the replay cases of both (test_components_graph.cpp: decode and topk 3 up to 256 requests):
// target verify, prefill and draft decode (topk 1 to 4) up to 64 requests (256 query rows at topk
// 4); the MTP expansion at every other topk up to 256 requests.
INSTANTIATE_TEST_SUITE_P(
    Buckets, MetadataGraph,
    ::testing::Values(ReplayPlan{"attn_metadata(bs=1,mode=2,extend=4,ctx=1024)", 64},
                      ReplayPlan{"attn_metadata(bs=1,mode=1,extend=5,ctx=1024,max_seq_len=700)", 64},
                      ReplayPlan{"attn_metadata(bs=1,mode=3,topk=1,ctx=1024)", 64},
                      ReplayPlan{"attn_metadata(bs=1,mode=3,topk=2,ctx=1024)", 64},
                      ReplayPlan{"attn_metadata(bs=1,mode=3,topk=3,ctx=1024)", 64},
                      ReplayPlan{"attn_metadata(bs=1,mode=3,topk=4,ctx=1024)", 64},
                      ReplayPlan{"mtp_expand(bs=1,topk=1,ctx=2048)", 256},
                      ReplayPlan{"mtp_expand(bs=1,topk=2,ctx=2048)", 256},
                      ReplayPlan{"mtp_expand(bs=1,topk=4,ctx=2048)", 256},
                      ReplayPlan{"attn_metadata(bs=1,mode=2,extend=4,ctx=1024,max_seq_len=700,temp=0)", 64},
                      ReplayPlan{"attn_metadata(bs=1,mode=0,ctx=2048,max_seq_len=1300)", 64, {8, 64}},
                      ReplayPlan{"attn_metadata(bs=1,mode=0,ctx=2048,max_seq_len=1300,temp=0)", 64, {8, 64}},
                      ReplayPlan{"mtp_expand(bs=1,topk=2,ctx=2048)", 64, {8, 64}}),
    [](const ::testing::TestParamInfo<ReplayPlan>& info) {
      return parse_case(info.param.base).test_name() + (info.param.buckets.empty() ? "" : "_coarse_buckets");
    });

}  // namespace
}  // namespace dsv4h
