// Properties of attn_metadata and mtp_expand on the GPU over shapes biased to their edges: batch
// sizes around the scan's 128-request chunks, real requests from none to all, every mode, widths
// around a page (256) and a C128 block, staging narrower than the buffers or not written (a replay's
// update), topk 1 to 4. Inputs draw seq_lens at the C4/C128/window/page boundaries half of the
// time. A failure prints the case and RapidCheck's RC_PARAMS line and is saved under
// fixtures/regressions/.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "gpu_env.h"
#include "harness/property.h"
#include "harness/verify.h"

namespace dsv4h {
namespace {

std::string s(int64_t v) { return std::to_string(v); }

Case metadata_case() {
  const int64_t bs = *property::boundary_size(0, 300, {128, 256});
  const int64_t real = *rc::gen::inRange<int64_t>(0, bs + 1);
  const int64_t mode = *rc::gen::inRange<int64_t>(0, 4);
  const int64_t extend = *rc::gen::inRange<int64_t>(1, 7);
  const int64_t topk = *rc::gen::inRange<int64_t>(1, 5);
  const int64_t ctx = *property::boundary_size(extend, 2100, {128, 256, 512});
  const int64_t max_seq_len = *rc::gen::inRange<int64_t>(extend, ctx + 1);
  const int64_t index_topk = *rc::gen::element<int64_t>(512, 1024);
  const int64_t temp = *rc::gen::inRange<int64_t>(0, 2);
  const uint64_t seed = *rc::gen::inRange<uint64_t>(0, 1u << 30);
  RC_PRE(bs * (mode == 3 ? topk : mode == 0 ? 1 : extend) <= 2048);
  return parse_case("attn_metadata(bs=" + s(bs) + ",real=" + s(real) + ",mode=" + s(mode) + ",extend=" + s(extend) +
                    ",topk=" + s(topk) + ",ctx=" + s(ctx) + ",max_seq_len=" + s(max_seq_len) + ",index_topk=" +
                    s(index_topk) + ",temp=" + s(temp) + ",pool=" + s(bs > 0 ? bs : 1) + ",seed=" + std::to_string(seed) + ")");
}

Case mtp_case() {
  const int64_t bs = *property::boundary_size(0, 300, {128, 256});
  const int64_t topk = *rc::gen::inRange<int64_t>(1, 5);
  const int64_t ctx = *property::boundary_size(1, 5000, {256});
  const int64_t fields = *rc::gen::inRange<int64_t>(0, 2);
  const uint64_t seed = *rc::gen::inRange<uint64_t>(0, 1u << 30);
  return parse_case("mtp_expand(bs=" + s(bs) + ",topk=" + s(topk) + ",ctx=" + s(ctx) + ",fields=" + s(fields) +
                    ",seed=" + std::to_string(seed) + ")");
}

void check(GpuBackend* gpu, const std::function<Case()>& generate, const std::string& name) {
  const bool ok = rc::check(name + " GPU == reference", [&] {
    const Case c = generate();
    const CaseRun run = run_case(registry().get(c.component()), c, gpu);
    if (!run.result.passed()) {
      const std::string path = property::save_regression(c, name + "-gpu-vs-reference", run.result.report());
      RC_FAIL(run.result.report() + "\n  saved as " + path);
    }
  });
  EXPECT_TRUE(ok) << "see the counterexample and the RC_PARAMS line above";
}

TEST(AttnMetadataGpuProperty, MatchesReferenceOnAnyBatch) {
  DSV4H_GPU_OR_SKIP(gpu);
  check(gpu, metadata_case, "attn_metadata");
}

TEST(MtpExpandGpuProperty, MatchesReferenceOnAnyBatch) {
  DSV4H_GPU_OR_SKIP(gpu);
  check(gpu, mtp_case, "mtp_expand");
}

}  // namespace
}  // namespace dsv4h
