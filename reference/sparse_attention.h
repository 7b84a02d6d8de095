// CPU reference of DeepSeek-V4's sparse attention (spec 3.4, 9.2): per query row and head, one
// softmax over the row's sliding-window entries and its compressed entries (C4: the indexer's
// selection, C128: every visible one, ratio 0: none) read from MODEL1 FP8 pools (spec 4.1), with
// the per-head sink in the denominator and the rope slice of the output de-rotated. fp64 from the
// dequantised cache; FlashMLA's `flash_mla_with_kvcache` semantics.
//
//   s_i = (q . k_i) * scale,  lse = log sum_i exp(s_i)    (over valid keys only, without the sink)
//   o   = sum_i softmax(s)_i k_i * 1 / (1 + exp(sink_h - lse)),  o[448:512] = rope^-1(o[448:512], p)
//
// A key is valid when its index is not -1 and its column is below the row's length for its scope.
// A row with no valid key writes o = 0 and lse = -FLT_MAX: the finite stand-in for log(0) = -inf,
// under which the sink factor 1 / (1 + exp(sink - lse)) is 0 too (FlashMLA returns 0 as well).
#pragma once

#include <cstdint>
#include <vector>

namespace dsv4h::reference {

constexpr int kAttentionDims = 512;  // K = V = the 512-dim latent (448 nope + 64 rope)

// One MODEL1 pool and one scope's indices into it: row n attends to slots
// indices[n * width + j] for j < lengths[n], except those equal to -1.
struct AttentionScope {
  const uint8_t* cache = nullptr;  // pages of tokens_per_page MODEL1 entries
  int64_t tokens_per_page = 0;
  int64_t slots = 0;               // pages * tokens_per_page
  const int32_t* indices = nullptr;
  int64_t width = 0;
  const int32_t* lengths = nullptr;
};

struct SparseAttentionProblem {
  int64_t rows = 0, heads = 0;
  const uint16_t* q = nullptr;        // [rows, heads, 512] bf16
  AttentionScope window;              // the SWA pool (swa_page_indices, swa_topk_lengths)
  AttentionScope extra;               // C4 or C128 pool; cache == nullptr for ratio-0 layers
  const float* sink = nullptr;        // [heads]
  const int32_t* positions = nullptr; // [rows]: the query's position, for the inverse rope
  int64_t compress_ratio = 0;         // 0, 4 or 128: the layer's rope table (spec 2.4)
  double scale = 0.04419417382415922; // 512^-0.5
};

// The bugs of issue 30's mutants, for CPU checks that the verify cases tell each from the right
// math; all false is the reference.
struct SparseAttentionBugs {
  bool sink_ignored = false;        // the denominator without exp(sink - m)
  bool sink_in_numerator = false;   // exp(sink - m) added to every numerator element too
  bool minus_one_unmasked = false;  // -1 inside the length read as a zero key (score 0, value 0)
  bool extra_one_too_many = false;  // one more compressed entry than the row's length
  bool window_short = false;        // the window p-126..p (127 entries)
  bool rope_not_inverted = false;
  bool empty_row_nan = false;       // a row with no valid key writes NaN
  bool scale_448 = false;           // 1/sqrt(448) instead of 1/sqrt(512)
};

struct SparseAttentionResult {
  std::vector<double> out;  // [rows, heads, 512], before rounding to bf16
  std::vector<double> lse;  // [rows, heads]
};

// BadInput naming the scope and row where a valid index lies outside its pool or a length
// outside [0, width].
SparseAttentionResult sparse_attention(const SparseAttentionProblem& problem, const SparseAttentionBugs& bugs = {});

}  // namespace dsv4h::reference
