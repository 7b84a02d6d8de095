// Bad input to the metadata kernels: the launch wrappers refuse impossible sizes naming the field
// (staging wider than the buffers, a staging set missing some fields, topk 0, an output size that
// is not bs * topk, an expansion beyond its kernel's 32-bit indices), and the harness refuses more
// real requests than the bucket holds before any launch.
#include <gtest/gtest.h>

#include "gpu_env.h"
#include "harness/verify.h"
#include "kernels/attn_metadata.h"
#include "kernels/mtp_expand.h"

namespace dsv4h {
namespace {

template <typename Launch>
void expect_refused(Launch launch, const std::string& mentions) {
  try {
    launch();
    FAIL() << "launch accepted " << mentions;
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
  }
}

AttnMetadataBuffers buffers(int64_t rows, int64_t page_cols, int64_t c128_cols, int64_t index_topk) {
  static int32_t dummy;  // never dereferenced: the wrapper refuses before launching
  int32_t* p = &dummy;
  return {p, p, p, p, p, p, p, p, p, p, p, p, p, p, p, p, rows, page_cols, c128_cols, index_topk};
}

// Arguments the update accepts (it would launch), each test breaking one thing.
AttnMetadataUpdateArgs valid_update() {
  static int32_t dummy;
  AttnMetadataUpdateArgs args{};
  args.req_to_token = args.full_to_swa = args.req_pool_indices = args.seq_lens = args.extend_lens =
      args.out_cache_loc = args.num_reqs = args.num_rows = &dummy;
  args.pool = args.full_slots = 1;
  args.ctx = 4096;
  args.max_reqs = 8;
  args.tokens_per_request = args.row_repeat = 1;
  args.staging = args.buffers = buffers(8, 4, 64, 512);
  return args;
}

TEST(MetadataGpuBadInput, UpdateRefusesStagingWiderThanTheBuffers) {
  DSV4H_GPU_OR_SKIP(gpu);
  const auto refused = [](const AttnMetadataBuffers& staging_set, const AttnMetadataBuffers& buffer_set,
                          const std::string& mentions) {
    AttnMetadataUpdateArgs args = valid_update();
    args.staging = staging_set;
    args.buffers = buffer_set;
    expect_refused([&] { launch_attn_metadata_update(args, nullptr); }, mentions);
  };
  refused(buffers(8, 5, 64, 512), buffers(8, 4, 64, 512),
          "page_table of the staging set is 5 wide, wider than its buffer (4)");
  refused(buffers(8, 4, 128, 512), buffers(8, 4, 64, 512), "c128_page_indices of the staging set is 128 wide");
  refused(buffers(8, 4, 64, 1024), buffers(8, 4, 64, 512), "c4_sparse_page_indices of the staging set is 1024 wide");
  refused(buffers(8, 4, 64, 512), buffers(-1, 4, 64, 512), "buffers.rows must be in [0, 2^24]");
}

// A staging set of null fields is a replay's (not written); one null field among others is a mistake.
TEST(MetadataGpuBadInput, UpdateRefusesAStagingSetMissingSomeFields) {
  DSV4H_GPU_OR_SKIP(gpu);
  AttnMetadataUpdateArgs args = valid_update();
  args.staging.c128_page_indices = nullptr;
  expect_refused([&] { launch_attn_metadata_update(args, nullptr); }, "staging: some fields null, some not");
  args = valid_update();
  args.buffers.page_table = nullptr;
  expect_refused([&] { launch_attn_metadata_update(args, nullptr); }, "buffers: null device pointer");
}

TEST(MetadataGpuBadInput, UpdateRefusesTopkZero) {
  DSV4H_GPU_OR_SKIP(gpu);
  AttnMetadataUpdateArgs args = valid_update();
  args.row_repeat = 0;
  expect_refused([&] { launch_attn_metadata_update(args, nullptr); }, "row_repeat (topk) must be >= 1, got 0");
}

TEST(MetadataGpuBadInput, MtpExpandRefusesTopkZeroAnImpliedSizeAndAnOversizedInput) {
  DSV4H_GPU_OR_SKIP(gpu);
  MtpExpandArgs args{};
  args.num_fields = 1;
  args.cols[0] = 128;
  args.requests = 4;
  args.topk = 0;
  expect_refused([&] { launch_mtp_expand(args, nullptr); }, "topk must be >= 1, got 0");
  args.topk = 2;
  args.output_rows = 9;
  expect_refused([&] { launch_mtp_expand(args, nullptr); }, "output_rows 9 != requests 4 x topk 2");
  // 2^24 requests of 257 columns: more work units than the kernel's 32-bit indices reach.
  static int32_t dummy;
  args.per_request[0] = args.expanded[0] = &dummy;
  args.cols[0] = 257;
  args.requests = int64_t{1} << 24;
  args.topk = 1;
  args.output_rows = int64_t{1} << 24;
  expect_refused([&] { launch_mtp_expand(args, nullptr); }, "field 0: the input passes 2^31 work units");
}

TEST(MetadataGpuBadInput, MoreRealRequestsThanTheBucketIsRefusedBeforeLaunch) {
  DSV4H_GPU_OR_SKIP(gpu);
  const Component& component = registry().get("attn_metadata");
  const Case c = parse_case("attn_metadata(bs=4,mode=0,pool=8)");
  TensorMap inputs = component.make_inputs(c);
  inputs["num_reqs"].data<int32_t>()[0] = 5;
  const CaseRun run = run_case(component, c, gpu, inputs);
  EXPECT_EQ(run.result.status, CaseStatus::bad_input);
  EXPECT_NE(run.result.message.find("num_reqs[0] = 5: more real requests than the bucket's bs = 4"), std::string::npos)
      << run.result.message;
  const CaseRun topk0 = run_case(registry().get("mtp_expand"), parse_case("mtp_expand(topk=0)"), gpu);
  EXPECT_EQ(topk0.result.status, CaseStatus::bad_input);
}

}  // namespace
}  // namespace dsv4h
