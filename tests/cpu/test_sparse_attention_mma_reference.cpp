// The tensor-core kernel's arithmetic (kernels/sparse_attention_mma.hip) emulated on the CPU against
// the fp64 reference, under the descriptor's own checks: the tolerance classes (out:
// bf16_rounded_once per (row, head), its exact-agreement rate included; lse: fp32_accumulated) must
// hold for its arithmetic, which the GPU run cannot show before it runs. Emulated: keys in tiles of
// 64 (zero rows for no key), each score as two halves of four 64-dim chunks (a chunk summed in fp32
// from exact bf16 products, added into its half in fp32), half 0 + half 1, then times the scale;
// the online softmax per tile in fp32; the weights entering P x V as bf16 hi + lo; the finish.
// Decode rows are split as the kernel splits them (sparse_attention_row_splits' rule: one split per
// 128 keys, at most 8, split z taking tiles [z T / S, (z + 1) T / S)), each split from a fresh
// state, merged in split order (M = max m_z, L and the accumulators summed with weights
// e^(m_z - M) by fused multiply-adds); prefill rows are one split. The tensor core's own order
// inside a chunk is not known: a sequential fp32 sum stands for it (its error is of the same size).
// (With the weights as bf16 hi alone, the same emulation agrees exactly with the reference on only
// 63-77% of out's elements, against the class's 90%: hence the kernel's lo part.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <string>
#include <vector>

#include "harness/compare.h"
#include "harness/component.h"
#include "reference/kv_cache_model1.h"
#include "reference/narrow_float.h"
#include "reference/rope.h"

namespace dsv4h {
namespace {

constexpr int kDims = 512, kNope = 448, kTile = 64;

float bf16_round(float x) { return reference::bf16_to_float(reference::double_to_bf16(x)); }

// The row's keys in the kernel's order (window columns, then compressed ones) with their validity.
struct RowKeys {
  std::vector<std::vector<float>> values;
  std::vector<bool> valid;
};

RowKeys gather(const TensorMap& in, int64_t ratio, int64_t row) {
  RowKeys keys;
  const auto scope = [&](const std::string& indices, const std::string& lengths, const std::string& cache, int64_t page) {
    const HostTensor& idx = in.at(indices);
    const int64_t width = idx.shape()[1], length = in.at(lengths).data<int32_t>()[row];
    const int64_t page_bytes = reference::model1_page_bytes(page);
    uint16_t latent[kDims];
    for (int64_t j = 0; j < length; ++j) {
      const int32_t slot = idx.data<int32_t>()[row * width + j];
      std::vector<float> v(kDims, 0.f);
      if (slot >= 0) {
        reference::model1_unpack_token(in.at(cache).data<uint8_t>() + slot / page * page_bytes, page, slot % page, latent);
        for (int d = 0; d < kDims; ++d) v[d] = reference::bf16_to_float(latent[d]);
      }
      keys.values.push_back(v);
      keys.valid.push_back(slot >= 0);
    }
  };
  scope("swa_indices", "swa_lengths", "swa_cache", 256);
  if (ratio != 0) scope("extra_indices", "extra_lengths", "extra_cache", ratio == 4 ? 64 : 2);
  return keys;
}

// One split's softmax state of a head: running max, sum and unnormalised accumulators.
struct SplitState {
  float m = -INFINITY, l = 0.f;
  std::vector<float> o = std::vector<float>(kDims, 0.f);
};

// A head's state over keys [begin, end) of the row, from a fresh state, tile by tile.
SplitState attend(const float* q, const RowKeys& keys, int64_t begin, int64_t end, float scale) {
  SplitState st;
  for (int64_t base = begin; base < end; base += kTile) {
    const int64_t tile_end = std::min(end, base + kTile);
    std::vector<float> p(static_cast<size_t>(tile_end - base));
    float tile_max = -INFINITY;
    for (int64_t k = base; k < tile_end; ++k) {
      float halves[2] = {0.f, 0.f};
      for (int half = 0; half < 2; ++half)
        for (int chunk = 0; chunk < 4; ++chunk) {
          float part = 0.f;
          for (int d = half * 256 + chunk * 64; d < half * 256 + chunk * 64 + 64; ++d) part += q[d] * keys.values[k][d];
          halves[half] += part;
        }
      p[k - base] = keys.valid[k] ? (halves[0] + halves[1]) * scale : -INFINITY;
      tile_max = std::fmax(tile_max, p[k - base]);
    }
    const float m_new = std::fmax(st.m, tile_max);
    const float alpha = m_new == -INFINITY ? 1.f : std::exp(st.m - m_new);
    float sum = 0.f;
    for (float& w : p) {
      w = m_new == -INFINITY ? 0.f : std::exp(w - m_new);
      sum += w;
    }
    st.l = st.l * alpha + sum;
    st.m = m_new;
    for (float& v : st.o) v *= alpha;
    for (int64_t k = base; k < tile_end; ++k) {
      const float hi = bf16_round(p[k - base]), lo = bf16_round(p[k - base] - hi);
      for (int d = 0; d < kDims; ++d) st.o[d] += hi * keys.values[k][d];
      for (int d = 0; d < kDims; ++d) st.o[d] += lo * keys.values[k][d];
    }
  }
  return st;
}

// The splits' states merged in split order, as the row's last split merges them.
SplitState merge(const std::vector<SplitState>& splits) {
  SplitState merged;
  for (const SplitState& s : splits) merged.m = std::fmax(merged.m, s.m);
  for (const SplitState& s : splits) {
    const float w = merged.m == -INFINITY || s.m == -INFINITY ? 0.f : std::exp(s.m - merged.m);
    if (w == 0.f) continue;
    merged.l = std::fma(w, s.l, merged.l);
    for (int d = 0; d < kDims; ++d) merged.o[d] = std::fma(w, s.o[d], merged.o[d]);
  }
  return merged;
}

// The kernel's outputs of one case: decode rows split, prefill rows whole.
void emulate(const Case& c, const TensorMap& in, TensorMap& out) {
  const int64_t rows = c.integer("bs"), heads = c.integer("heads"), ratio = c.integer("ratio");
  const bool split = c.integer("prefill") == 0;
  const float scale = 0.044194173824159216f;
  const Eigen::VectorXd freqs = reference::rope_frequencies(reference::rope_for_ratio(ratio));
  for (int64_t n = 0; n < rows; ++n) {
    const RowKeys keys = gather(in, ratio, n);
    const int64_t total = static_cast<int64_t>(keys.valid.size()), tiles = (total + kTile - 1) / kTile;
    const int64_t splits = split ? std::clamp<int64_t>((total + 127) / 128, 1, 16) : 1;
    for (int64_t h = 0; h < heads; ++h) {
      float q[kDims];
      for (int d = 0; d < kDims; ++d) q[d] = reference::bf16_to_float(in.at("q").data<uint16_t>()[(n * heads + h) * kDims + d]);
      std::vector<SplitState> parts;
      for (int64_t z = 0; z < splits; ++z)
        parts.push_back(attend(q, keys, z * tiles / splits * kTile, std::min(total, (z + 1) * tiles / splits * kTile), scale));
      const SplitState st = splits == 1 ? parts[0] : merge(parts);
      const float sink = in.at("sink").data<float>()[h];
      const bool empty = st.l == 0.f;
      const float lse = empty ? -FLT_MAX : st.m + std::log(st.l);
      const float x = sink - lse;
      const float factor = x > 0.f ? std::exp(-x) / (1.f + std::exp(-x)) : 1.f / (1.f + std::exp(x));
      const float out_scale = empty ? 0.f : factor / st.l;
      for (int d = 0; d < kDims; d += 2) {
        float o0 = st.o[d] * out_scale, o1 = st.o[d + 1] * out_scale;
        if (d >= kNope) {
          const double angle = static_cast<double>(in.at("positions").data<int32_t>()[n]) * freqs((d - kNope) / 2);
          const double cs = std::cos(angle), sn = std::sin(angle);
          const float r0 = static_cast<float>(o0 * cs + o1 * sn), r1 = static_cast<float>(o1 * cs - o0 * sn);
          o0 = r0, o1 = r1;
        }
        out.at("out").set((n * heads + h) * kDims + d, o0);
        out.at("out").set((n * heads + h) * kDims + d + 1, o1);
      }
      out.at("lse").set(n * heads + h, lse);
    }
  }
}

// The emulation of every verify case of `prefill` rows (the larger ones skipped: slow here) under
// the descriptor's checks, each within half its budget; returns how many were checked.
int64_t check_verify_cases(int64_t prefill) {
  const Component& component = registry().get("sparse_attention");
  int64_t checked = 0;
  for (const std::string& text : component.verify_cases) {
    const Case c = parse_case(text, 1);
    if (c.integer("prefill") != prefill || c.integer("bs") * c.integer("heads") > 2048) continue;
    const TensorMap inputs = component.make_inputs(c);
    const TensorMap expected = reference_outputs(component, c, inputs, Poison::a);
    TensorMap got = checked_outputs(component, c, inputs);
    emulate(c, inputs, got);
    for (const auto& [name, check] : component.checks(c)) {
      const OutputComparison r = compare_output(name, expected.at(name), Poison::a, got.at(name), Poison::b, check);
      EXPECT_TRUE(r.passed()) << text << ": " << r.summary();
      EXPECT_LT(r.budget_used, 0.5) << text << " " << name << ": the emulation used half its tolerance";
    }
    ++checked;
  }
  return checked;
}

TEST(SparseAttentionMma, KernelArithmeticMeetsTheDescriptorsChecksOnThePrefillVerifyCases) {
  EXPECT_GE(check_verify_cases(1), 10);
}

// Decode rows: split, merged by the last split.
TEST(SparseAttentionMma, SplitKernelArithmeticMeetsTheDescriptorsChecksOnTheDecodeVerifyCases) {
  EXPECT_GE(check_verify_cases(0), 20);
}

}  // namespace
}  // namespace dsv4h
