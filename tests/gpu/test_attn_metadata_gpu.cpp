// attn_metadata and mtp_expand on the GPU against the reference, exactly, beside their verify cases
// and golden fixtures (test_components_gpu.cpp): larger batches of every mode, and unaligned and
// long rows. Each run poisons the outputs twice, so a row or column nobody wrote fails.
#include <gtest/gtest.h>

#include "gpu_env.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

std::vector<Case> cases() {
  std::vector<Case> all;
  for (const char* text : {"attn_metadata(bs=256,real=255,mode=0,seed=11)",
                           "attn_metadata(bs=256,real=200,mode=2,extend=4,ctx=4096,max_seq_len=3000,seed=12)",
                           "attn_metadata(bs=64,real=63,mode=1,extend=16,seed=13)",
                           "attn_metadata(bs=128,real=1,mode=3,topk=4,seed=14)",
                           "attn_metadata(bs=130,mode=1,extend=3,pool=130,seed=15)",
                           // page_table rows of 6 columns, not 16-byte multiples: the kernel's
                           // variants for unaligned rows, fixed tokens and prefill
                           "attn_metadata(bs=32,real=29,mode=2,extend=3,ctx=1300,seed=17)",
                           "attn_metadata(bs=32,real=30,mode=1,extend=6,ctx=1300,max_seq_len=1000,seed=18)",
                           // rows of 235-512 page starts, so every warp of a block has some (as
                           // in the decode-only verify case of ctx 524289), aligned and not,
                           // fixed tokens and prefill
                           "attn_metadata(bs=4,mode=2,extend=3,ctx=60000,pool=4,seed=19)",
                           "attn_metadata(bs=4,mode=1,extend=5,ctx=65536,pool=4,seed=20)",
                           "attn_metadata(bs=3,mode=0,ctx=131072,pool=3,seed=21)",
                           "attn_metadata(bs=4,mode=1,extend=4,ctx=100000,pool=4,seed=22)",
                           "mtp_expand(bs=256,topk=4,seed=16)",
                           // topk above 4: the expansion's copy loop (unrolled by 3 after copy 0)
                           // runs both its unrolled body and its remainder
                           "mtp_expand(bs=5,topk=7,seed=23)"})
    all.push_back(parse_case(text));
  return all;
}

class MetadataGpu : public ::testing::TestWithParam<Case> {};

TEST_P(MetadataGpu, MatchesReferenceExactly) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Case& c = GetParam();
  std::printf("case %s (seed %llu)\n", c.str().c_str(), static_cast<unsigned long long>(c.seed()));
  const CaseRun run = run_case(registry().get(c.component()), c, gpu);
  EXPECT_TRUE(run.result.passed()) << run.result.report();
}

INSTANTIATE_TEST_SUITE_P(VerifyCases, MetadataGpu, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.test_name(); });

}  // namespace
}  // namespace dsv4h
