// sparse_attention's GPU checks beside the generic ones (every verify case against the reference,
// graph replay, relations): prefill == decode for the same tokens. Prefill rows take a block each
// over all their keys, decode rows split their keys over several blocks merged by the last one (on
// NVIDIA both in kernels/sparse_attention_mma.hip; on AMD the scalar kernels/sparse_attention.hip,
// unsplit and split); the same rows both ways agree within the outputs' tolerance classes (each way
// is within them of the reference, and the classes leave room for two: see the CPU emulation of
// both, tests/cpu/test_sparse_attention_mma_reference.cpp, which uses under half of each bound).
#include <gtest/gtest.h>

#include <string>

#include "gpu_env.h"
#include "harness/compare.h"
#include "harness/gpu/device_tensor.h"
#include "harness/poison.h"

namespace dsv4h {
namespace {

TensorMap run_on_gpu(const Component& component, const Case& c, const DeviceTensorMap& inputs, Poison poison) {
  TensorMap host = component.make_outputs(c);
  fill_poison(host, poison);
  DeviceTensorMap outputs = DeviceTensorMap::upload(host);
  component.gpu(c, inputs, outputs, nullptr);
  DSV4H_HIP_CHECK(hipStreamSynchronize(nullptr));
  return outputs.download();
}

TEST(SparseAttentionGpu, PrefillRowsEqualTheirDecodeStepsWithinTheTolerances) {
  DSV4H_GPU_OR_SKIP(gpu);
  (void)gpu;  // the component's launcher is called directly
  const Component& component = registry().get("sparse_attention");
  for (const char* text : {"sparse_attention(bs=40,ratio=4,prefill=1,pos=2030,ctx=4096)",
                           "sparse_attention(bs=20,ratio=128,prefill=1,pos=240,ctx=4096,heads=128)",
                           "sparse_attention(bs=10,ratio=0,prefill=1,pos=120,heads=48)",
                           "sparse_attention(bs=6,ratio=4,prefill=1,ctx=3000,padding=2)"}) {
    const Case prefill = parse_case(text);
    const Case decode = prefill.with("prefill", "0");
    const TensorMap inputs = component.make_inputs(prefill);
    const DeviceTensorMap device = DeviceTensorMap::upload(inputs);
    const TensorMap by_decode = run_on_gpu(component, decode, device, Poison::a);
    const TensorMap by_prefill = run_on_gpu(component, prefill, device, Poison::b);
    for (const auto& [name, check] : component.checks(prefill)) {
      const OutputComparison r = compare_output(name, by_decode.at(name), Poison::a, by_prefill.at(name), Poison::b, check);
      EXPECT_TRUE(r.passed()) << text << ": " << r.summary();
      // Two runs that both leave an element unwritten agree on it: every element of out and lse is
      // written (a padding row's too), so none may be (the noop mutant passed this test without it).
      EXPECT_EQ(r.unwritten, 0) << text << ": " << name << " has elements neither way wrote";
    }
  }
}

}  // namespace
}  // namespace dsv4h
