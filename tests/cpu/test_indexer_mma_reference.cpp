// The tensor-core scoring kernel's arithmetic (kernels/indexer_logits_mma.hip) replayed on the CPU
// over every select-stage verify case of the indexer, against the fp64 reference under the
// descriptor's own checks (scores by row_rel_l2 relative to the terms' magnitudes, with the
// distribution bound; the selection as tie-aware sets), as the GPU run will compare it.
//
// Replayed exactly: the codes as the kernel's exact f16 values, each head's dot in 8 MMA steps of
// 16 channels (the kernel's channel permutation: lane t of step s takes channels (s / 4) * 64 +
// t * 16 + (s % 4) * 4 .. + 3), relu(dot) * (w_h * q_scale_h) as an fp32 FMA chain over the 8 heads
// of a lane (rows g, g + 8 of each 16-head tile), the 8 lanes' partial sums by butterfly (xor 4, 8,
// 16), then the k scale. Modelled: the MMA's f32 accumulation, which PTX does not specify. Two
// models: (a) each step's sum of C and its 16 exact products rounded once to nearest f32; (b) a
// pessimistic one, of the kind measured on V100 to A100 (Fasi, Higham, Mikaitis and Pranesh,
// "Numerical behavior of NVIDIA tensor cores", PeerJ CS 2021): every addend truncated toward zero
// at 2^-23 of the largest addend's binade (no guard bits), the sum then truncated to f32. (b)'s
// truncation is directed: the distribution bound on the mean signed error is what it tests. (The
// same replay with 14 significant bits instead of 24, as Hopper's e4m3 MMA keeps, fails both checks
// on most verify cases: why the kernel multiplies in f16.)
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness/compare.h"
#include "harness/component.h"
#include "harness/verify.h"
#include "reference/indexer.h"
#include "reference/kv_cache_indexer.h"
#include "reference/narrow_float.h"

namespace dsv4h {
namespace {

using reference::kC4EntriesPerPage;

enum class Accumulation { nearest, truncating };

// One MMA step's D = C + sum of 16 exact products. Every sum below is exact in double: e4m3
// values are multiples of 2^-9, so products are multiples of 2^-18 below 2^18, and C an f32.
float mma_step(float c, const float* q, const float* k, Accumulation mode) {
  std::array<double, 17> addends;
  double largest = std::fabs(c);
  addends[16] = c;
  for (int i = 0; i < 16; ++i) {
    addends[static_cast<size_t>(i)] = static_cast<double>(q[i]) * k[i];
    largest = std::max(largest, std::fabs(addends[static_cast<size_t>(i)]));
  }
  double sum = 0;
  if (mode == Accumulation::nearest) {
    for (double a : addends) sum += a;
    return static_cast<float>(sum);
  }
  if (largest == 0) return 0.f;
  const double quantum = std::ldexp(1.0, std::ilogb(largest) - 23);
  for (double a : addends) sum += std::trunc(a / quantum) * quantum;
  float f = static_cast<float>(sum);
  if (std::fabs(static_cast<double>(f)) > std::fabs(sum)) f = std::nextafter(f, 0.f);
  return f;
}

// The channel the kernel's k-step s gives to position i (0..15) of its 16: lane i / 4, byte i % 4.
int channel_of(int s, int i) { return (s / 4) * 64 + (i / 4) * 16 + (s % 4) * 4 + i % 4; }

// The kernel's scores of every row of a select-stage case.
HostTensor kernel_scores(const Case& c, const TensorMap& in, Accumulation mode) {
  const int64_t bs = c.integer("bs"), heads = c.integer("heads");
  const int64_t pages = in.at("page_table").shape()[1], width = pages * kC4EntriesPerPage;
  const int64_t padded_heads = (heads + 15) / 16 * 16;
  HostTensor out(DType::f32, {bs, width});
  const uint8_t* codes = in.at("q_fp8").bytes();
  const uint8_t* cache = in.at("indexer_cache").bytes();
  const int64_t page_bytes = reference::indexer_page_bytes(kC4EntriesPerPage);
  std::vector<float> q(static_cast<size_t>(padded_heads * 128)), key(128), weight(static_cast<size_t>(padded_heads));
  for (int64_t r = 0; r < bs; ++r) {
    std::fill(q.begin(), q.end(), 0.f);
    std::fill(weight.begin(), weight.end(), 0.f);
    for (int64_t h = 0; h < heads; ++h) {
      weight[static_cast<size_t>(h)] = static_cast<float>(in.at("weights").get(r * heads + h)) *
                                       static_cast<float>(in.at("q_scale").get(r * heads + h));
      for (int s = 0; s < 8; ++s)
        for (int i = 0; i < 16; ++i)
          q[static_cast<size_t>(h * 128 + s * 16 + i)] =
              reference::fp8_e4m3_to_float(codes[(r * heads + h) * 128 + channel_of(s, i)]);
    }
    const int64_t visible = std::min(reference::c4_visible(in.at("positions").data<int32_t>()[r]), width);
    for (int64_t j = 0; j < width; ++j) {
      if (j >= visible) {
        out.set(r * width + j, -INFINITY);
        continue;
      }
      const uint8_t* page = cache + in.at("page_table").data<int32_t>()[r * pages + j / kC4EntriesPerPage] * page_bytes;
      const int64_t t = j % kC4EntriesPerPage;
      for (int s = 0; s < 8; ++s)
        for (int i = 0; i < 16; ++i) key[static_cast<size_t>(s * 16 + i)] = reference::fp8_e4m3_to_float(page[t * 128 + channel_of(s, i)]);
      float k_scale;
      std::memcpy(&k_scale, page + kC4EntriesPerPage * 128 + t * 4, 4);
      std::array<float, 8> lane{};  // lane g's sum over heads 16m + g, 16m + g + 8
      for (int g = 0; g < 8; ++g)
        for (int64_t m = 0; m < padded_heads / 16; ++m)
          for (int64_t h : {16 * m + g, 16 * m + g + 8}) {
            float dot = 0.f;
            for (int s = 0; s < 8; ++s) dot = mma_step(dot, &q[static_cast<size_t>(h * 128 + s * 16)], &key[static_cast<size_t>(s * 16)], mode);
            lane[static_cast<size_t>(g)] = std::fma(std::max(dot, 0.f), weight[static_cast<size_t>(h)], lane[static_cast<size_t>(g)]);
          }
      const float sum = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
      out.set(r * width + j, sum * k_scale);
    }
  }
  return out;
}

TEST(IndexerMmaOrder, PassesTheDescriptorsChecksOnEveryVerifyCase) {
  const Component& indexer = registry().get("indexer");
  int cases = 0;
  for (const std::string& text : indexer.verify_cases) {
    const Case c = parse_case(text);
    if (c.integer("stage") != 0) continue;
    ++cases;
    const TensorMap inputs = indexer.make_inputs(c);
    const TensorMap expected = reference_outputs(indexer, c, inputs, Poison::a);
    const TensorMap scores = topk_scores(indexer, c, inputs, expected);
    for (Accumulation mode : {Accumulation::nearest, Accumulation::truncating}) {
      const std::string label = text + (mode == Accumulation::nearest ? " (nearest)" : " (truncating)");
      const HostTensor got = kernel_scores(c, inputs, mode);
      const OutputComparison r = compare_output("scores", expected.at("scores"), Poison::a, got, Poison::a,
                                                output_check(indexer, c, "scores", DType::f32), &scores);
      EXPECT_TRUE(r.passed()) << label << ": " << r.summary();
      // The kernel's top-k over these scores, as the reference selects over its own.
      const int64_t bs = c.integer("bs"), topk = c.integer("index_topk"), width = got.shape()[1];
      HostTensor selected(DType::i32, {bs, topk});
      for (int64_t row = 0; row < bs; ++row) {
        Eigen::VectorXd s(width);
        for (int64_t j = 0; j < width; ++j) s(j) = got.get(row * width + j);
        const int64_t visible = std::min(reference::c4_visible(inputs.at("positions").data<int32_t>()[row]), width);
        const std::vector<int32_t> raw = reference::indexer_topk(s, visible, topk);
        std::memcpy(selected.data<int32_t>() + row * topk, raw.data(), raw.size() * 4);
      }
      const OutputComparison sets =
          compare_output("topk_indices", expected.at("topk_indices"), Poison::a, selected, Poison::a,
                         output_check(indexer, c, "topk_indices", DType::i32), &scores);
      EXPECT_TRUE(sets.passed()) << label << ": " << sets.summary();
    }
  }
  EXPECT_GT(cases, 10);
}

}  // namespace
}  // namespace dsv4h
