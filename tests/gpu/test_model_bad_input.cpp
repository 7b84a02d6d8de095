// What the tiny model's GPU forward refuses, whatever its kernels compute: an injected fault on an
// output it cannot write back (fp8 codes with scales) is an error naming the op, never a silently
// unperturbed run. In test_gpu only, not in the mutant binaries: it passes with any kernels, and
// the noop mutant must fail every test it runs.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "gpu_env.h"
#include "model_gpu_run.h"

namespace dsv4h {
namespace {

using namespace model_gpu_test;

TEST(ModelGpuBisection, AnUnwritableOutputIsAnError) {
  DSV4H_GPU_OR_SKIP(gpu);
  try {
    bisect_gpu({9, 1, 1, 512, 8}, {}, "layers.1.attn.indexer.q");
    FAIL() << "a changed indexer.q went unnoticed";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("layers.1.attn.indexer.q"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dsv4h
