// The compressor's consistency on the GPU, kernels against themselves (issue 29): a sequence of 300
// tokens compressed by one prefill, by two chunks split at every point (the second starting from
// the state the first left, in place as an engine keeps it), and token by token (decode), gives
// the same pool bit for bit, for C4 main, C4 indexer and C128. Beside the generic tests, which
// compare each path with the reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "gpu_env.h"
#include "harness/gpu/device_tensor.h"
#include "harness/random.h"
#include "kernels/compressor.h"

namespace dsv4h {
namespace {

constexpr int64_t kTokens = 300;

struct Sequence {
  int64_t ratio, dims, width, ring_rows, slots, page_bytes, page_entries;
  DeviceBuffer kv, score, ape, norm_weight, out_loc;
  std::vector<float> clean_ring;  // ring 0 unused, ring 1 the request's: (1 + 1) * R rows

  Sequence(int64_t r, int64_t d)
      : ratio(r), dims(d), width((r == 4 ? 2 : 1) * d), ring_rows(r == 4 ? 8 : 128),
        slots(kTokens / r + 1), page_entries(d == 128 || r == 4 ? 64 : 2),
        kv(kTokens * width * 4), score(kTokens * width * 4), ape(r * width * 4), norm_weight(d * 4),
        out_loc(kTokens * 4) {
    page_bytes = d == 128 ? page_entries * 132 : (page_entries * 584 + 575) / 576 * 576;
    Rng rng(static_cast<uint64_t>(r * 1000 + d));
    const auto upload = [&](DeviceBuffer& b, double mean, double stddev) {
      HostTensor t(DType::f32, {static_cast<int64_t>(b.bytes() / 4)});
      fill_normal(t, rng, mean, stddev);
      DSV4H_HIP_CHECK(hipMemcpy(b.data(), t.bytes(), t.nbytes(), hipMemcpyHostToDevice));
    };
    upload(kv, 0, 1);
    upload(score, 0, 2);
    upload(ape, 0, 1);
    upload(norm_weight, 1, 0.25);
    std::vector<int32_t> loc(kTokens, 0);
    for (int64_t t = 0; t < kTokens; ++t)
      if ((t + 1) % r == 0) loc[t] = static_cast<int32_t>((t + 1) / r);  // entry j at slot j + 1
    DSV4H_HIP_CHECK(hipMemcpy(out_loc.data(), loc.data(), loc.size() * 4, hipMemcpyHostToDevice));
    clean_ring.resize(2 * ring_rows * 2 * width);
    for (size_t i = 0; i < clean_ring.size(); ++i) clean_ring[i] = i % (2 * width) < static_cast<size_t>(width) ? 0.f : -INFINITY;
  }
  size_t pool_bytes() const { return static_cast<size_t>((slots + page_entries) / page_entries * page_bytes); }
};

DeviceBuffer upload_i32(std::vector<int32_t> v) {
  DeviceBuffer d(v.size() * 4);
  DSV4H_HIP_CHECK(hipMemcpy(d.data(), v.data(), v.size() * 4, hipMemcpyHostToDevice));
  return d;
}

// Runs the tokens [0, kTokens) in the chunks that end at `splits`, each step's state in place
// (ring_out starts as a copy of the ring and becomes the next step's ring); returns the pool.
std::vector<uint8_t> run_chunks(const Sequence& s, const std::vector<int64_t>& splits, hipStream_t stream) {
  DeviceBuffer pool(s.pool_bytes()), ring(s.clean_ring.size() * 4), ring_out(s.clean_ring.size() * 4);
  DSV4H_HIP_CHECK(hipMemcpy(ring.data(), s.clean_ring.data(), ring.bytes(), hipMemcpyHostToDevice));
  std::vector<uint8_t> poison(pool.bytes(), 0xa5);
  DSV4H_HIP_CHECK(hipMemcpy(pool.data(), poison.data(), pool.bytes(), hipMemcpyHostToDevice));
  const DeviceBuffer ring_index = upload_i32({1});
  int64_t start = 0;
  for (int64_t end : splits) {
    DSV4H_HIP_CHECK(hipMemcpyAsync(ring_out.data(), ring.data(), ring.bytes(), hipMemcpyDeviceToDevice, stream));
    const DeviceBuffer starts = upload_i32({static_cast<int32_t>(start)});
    const DeviceBuffer lens = upload_i32({static_cast<int32_t>(end - start)});
    CompressorArgs a;
    a.kv = static_cast<const float*>(s.kv.data()) + start * s.width;
    a.score = static_cast<const float*>(s.score.data()) + start * s.width;
    a.ape = static_cast<const float*>(s.ape.data());
    a.norm_weight = static_cast<const float*>(s.norm_weight.data());
    a.ring = static_cast<const float*>(ring.data());
    a.start = static_cast<const int32_t*>(starts.data());
    a.extend_len = static_cast<const int32_t*>(lens.data());
    a.ring_index = static_cast<const int32_t*>(ring_index.data());
    a.out_loc = static_cast<const int32_t*>(s.out_loc.data()) + start;
    a.pool = static_cast<uint8_t*>(pool.data());
    a.ring_out = static_cast<float*>(ring_out.data());
    a.ratio = s.ratio;
    a.dims = s.dims;
    a.batch = 1;
    a.tokens = end - start;
    a.pool_slots = static_cast<int64_t>(s.pool_bytes() / s.page_bytes * s.page_entries);
    launch_compressor(a, stream);
    DSV4H_HIP_CHECK(hipStreamSynchronize(stream));
    std::swap(ring, ring_out);
    start = end;
  }
  std::vector<uint8_t> host(pool.bytes());
  DSV4H_HIP_CHECK(hipMemcpy(host.data(), pool.data(), pool.bytes(), hipMemcpyDeviceToHost));
  return host;
}

TEST(CompressorGpu, ChunkedAtEverySplitAndDecodeEqualPrefillBitForBit) {
  DSV4H_GPU_OR_SKIP(gpu);
  (void)gpu;  // the kernels are launched directly
  hipStream_t stream = nullptr;
  DSV4H_HIP_CHECK(hipStreamCreate(&stream));
  for (const std::pair<int64_t, int64_t>& config : {std::pair<int64_t, int64_t>{4, 512}, {4, 128}, {128, 512}}) {
    const int64_t ratio = config.first, dims = config.second;
    const Sequence s(ratio, dims);
    const std::vector<uint8_t> prefill = run_chunks(s, {kTokens}, stream);
    ASSERT_NE(prefill, std::vector<uint8_t>(prefill.size(), 0xa5)) << "the prefill wrote nothing";
    for (int64_t split = 1; split < kTokens; ++split)
      ASSERT_EQ(run_chunks(s, {split, kTokens}, stream), prefill) << "ratio " << ratio << " dims " << dims << " split " << split;
    std::vector<int64_t> every_token;
    for (int64_t t = 1; t <= kTokens; ++t) every_token.push_back(t);
    EXPECT_EQ(run_chunks(s, every_token, stream), prefill) << "decode, ratio " << ratio << " dims " << dims;
  }
  DSV4H_HIP_CHECK(hipStreamDestroy(stream));
}

}  // namespace
}  // namespace dsv4h
