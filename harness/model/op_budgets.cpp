// The budget table of the model's ops. Every budget is a tolerance class of harness/tolerance.cpp,
// compared per row (row_rel_l2: a row is one token's output, or one MTP stream's), for a candidate
// that computes an op in fp32 or wider from the inputs it is given and rounds its output once to
// the dtype the GPU forward stores (bf16 activations; fp32 mixes, logits, routing weights and MoE
// partials), as the components' kernels do. The reference side is the fp64 op on those same
// inputs (teacher forcing, bisect.h), unrounded: a correct candidate is then within half an ulp of
// it plus its own arithmetic's error, inside the class's row bound, which allows a full ulp.
//
//   bf16 outputs (norms, GEMMs, q rope, attend, mHC x and streams, the head's reduction): the
//     class bf16_rounded_once, row bound 2^-7. The rounding takes at most 2^-8 of a row's norm; a
//     GEMM's fp32 sum adds (4 sqrt(K) + 1) 2^-24 per row (fp32_accumulated's bound), under 2^-15
//     for K <= 8192; the norms' and attention's fp32 math is of the same order (rms_norm.cpp and
//     sparse_attention.cpp derive theirs). The attend's row is a token's 8 heads together, and
//     each head alone is held to the same bound by sparse_attention's check.
//   fp32 outputs of one sum (gate logits, the indexer's head weights, the head's logits):
//     fp32_accumulated over K = dim.
//   mHC's post and comb, the routing weights: fp32_rounded_once, as the mhc and moe_routing
//     descriptors check them (their kernels compute in fp64 and round once).
//   The routed experts' and the shared expert's outputs: fp32_over_bf16_stage with K = inter + topk
//     (inter + 1), as the moe descriptor checks its combined output: the kernels store the gate/up
//     outputs and the activation in bf16 between the GEMMs, and the reference against the GPU
//     forward rounds the same two stages (ReferenceOptions::expert_bf16_stages), so the two differ
//     only where a stage's value fell on the other side of a rounding point, the class's premise.
//     (An unrounded reference leaves every element's two roundings in the error: up to 1.02 of
//     the bound on the H100, 2026-12-06, and routinely 0.7-0.9 of it.)
//   Quantised outputs, the cached latent and the compressed entries (FP8 e4m3 on the MODEL1 grid)
//     and the indexer's keys and queries (FP4 e2m1 on 32-blocks): fp8_quantised, row bound 2^-3.
//     Both sides quantise the same value up to the candidate's fp32 error (about 2^-20 of a step),
//     so they differ only where a value lies that close to a rounding midpoint, and then by one
//     step: at most one element of a row, in practice none. One e4m3 step is 2^-3 of its value. An
//     e2m1 step is up to half its value (4 to 6), but the element is one of 128 of a row whose
//     norm, for values of a roughly normal spread, is about 4 times its largest: again 2^-3.
//     Against the GPU forward the reference's indexer keys and queries are not quantised
//     (gpu_forward_reference_options) and the GPU's are e4m3: each element then differs by at most
//     half an e4m3 step, 2^-4 of its value, inside the same 2^-3 row bound.
//   Integer outputs (expert ids, selected entries) and the embedding's gather: exact, the share of
//     elements that differ. From equal inputs the choice is the same unless two scores tie within
//     the candidate's fp32 error; a fixture of the op (moe_routing, or the indexer's topk_set
//     check) shows whether a flagged choice was such a tie.
#include "op_budgets.h"

#include <cstring>
#include <map>
#include <stdexcept>

#include "harness/tolerance.h"

namespace dsv4h {

std::string op_kind(const std::string& op) {
  for (const char* prefix : {"layers.", "mtp."})
    if (op.rfind(prefix, 0) == 0) {
      const size_t dot = op.find('.', std::strlen(prefix));
      if (dot != std::string::npos) return op.substr(dot + 1);
    }
  return op;
}

std::string op_layer(const std::string& op) {
  const std::string kind = op_kind(op);
  return kind.size() == op.size() ? "" : op.substr(0, op.size() - kind.size() - 1);
}

namespace {

OutputCheck row(ToleranceClass tolerance, int64_t terms = 0) { return {tolerance, Comparator::row_rel_l2, terms, ""}; }
OutputCheck exact() { return {ToleranceClass::exact, Comparator::elementwise, 0, ""}; }

}  // namespace

OpBudget op_budget(const std::string& op, const model::ModelConfig& c) {
  using TC = ToleranceClass;
  const OutputCheck bf16 = row(TC::bf16_rounded_once), fp8 = row(TC::fp8_quantised);
  const std::string gemm = "a GEMM (cuBLAS/hipBLASLt): no component of its own";
  const std::map<std::string, OpBudget> table = {
      {"embed", {{{"h", exact()}}, "", "a row gather of the bf16 embedding"}},
      {"hc_attn.pre", {{{"x", bf16}, {"post", row(TC::fp32_rounded_once)}, {"comb", row(TC::fp32_rounded_once)}}, "mhc", ""}},
      {"hc_ffn.pre", {{{"x", bf16}, {"post", row(TC::fp32_rounded_once)}, {"comb", row(TC::fp32_rounded_once)}}, "mhc", ""}},
      {"hc_attn.post", {{{"h", bf16}}, "mhc", ""}},
      {"hc_ffn.post", {{{"h", bf16}}, "mhc", ""}},
      {"attn_norm", {{{"y", bf16}}, "rms_norm", ""}},
      {"ffn_norm", {{{"y", bf16}}, "rms_norm", ""}},
      {"attn.q_norm", {{{"y", bf16}}, "rms_norm", ""}},
      {"attn.kv_norm", {{{"y", bf16}}, "rms_norm", ""}},
      {"enorm", {{{"y", bf16}}, "rms_norm", ""}},
      {"hnorm", {{{"y", bf16}}, "rms_norm", ""}},
      {"head.norm", {{{"y", bf16}}, "rms_norm", ""}},
      {"attn.wq_a", {{{"y", bf16}}, "", gemm}},
      {"attn.wq_b", {{{"y", bf16}}, "", gemm}},
      {"attn.wkv", {{{"y", bf16}}, "", gemm}},
      {"attn.wo_a", {{{"y", bf16}}, "", gemm + " (grouped)"}},
      {"attn.wo_b", {{{"y", bf16}}, "", gemm}},
      {"e_proj", {{{"y", bf16}}, "", gemm}},
      {"h_proj", {{{"y", bf16}}, "", gemm}},
      {"attn.q_rope", {{{"q", bf16}}, "", "the per-head norm and rope of q: fused into the GPU forward's glue, no component"}},
      {"attn.kv_cache", {{{"latent", fp8}}, "", "kv rope and the MODEL1 FP8 store: memory_pool's, whose cases take pool "
                                                "slots, not a layer's rows"}},
      {"attn.compress", {{{"entries", fp8}}, "compressor", "one request's step from the op's start and ring"}},
      {"attn.indexer.compress", {{{"keys", fp8}}, "compressor", "dims 128; the fixture's pool holds the keys before FP4"}},
      {"attn.indexer.q", {{{"q", fp8}}, "", "the indexer's q GEMM, rope, rotation and FP4: no component of its own"}},
      {"attn.indexer.weights", {{{"weights", row(TC::fp32_accumulated, c.dim)}}, "", gemm}},
      {"attn.index_select", {{{"indices", exact()}}, "", "the indexer component scores against its paged FP8 cache: the "
                                                         "model's fixture of it is not written yet"}},
      {"attn.attend", {{{"o", bf16}}, "sparse_attention", "pools packed from the cache the op read; heads padded to 16"}},
      {"ffn.gate", {{{"logits", row(TC::fp32_accumulated, c.dim)}}, "", gemm}},
      {"ffn.route", {{{"ids", exact()}, {"weights", row(TC::fp32_rounded_once)}}, "moe_routing", ""}},
      {"ffn.experts", {{{"y", row(TC::fp32_over_bf16_stage, c.moe_inter_dim + c.n_activated_experts)}}, "moe", ""}},
      {"ffn.shared", {{{"y", row(TC::fp32_over_bf16_stage, c.moe_inter_dim + 1)}}, "moe", "one expert, weight 1"}},
      {"head.hc", {{{"x", bf16}}, "", "the head's hc reduction (sigmoid weights, no Sinkhorn): no component"}},
      {"head.proj", {{{"y", row(TC::fp32_accumulated, c.dim)}}, "", gemm}},
      {"input", {{{"h", bf16}}, "", "the MTP block's sum of its two projections into the streams: glue"}},
  };
  const auto it = table.find(op_kind(op));
  if (it == table.end()) throw std::logic_error("op_budget: no budget for op " + op);
  return it->second;
}

double budget_of(const OutputCheck& check) {
  return check.tolerance == ToleranceClass::exact ? 0.0 : allowed_row_rel_l2(check);
}

}  // namespace dsv4h
