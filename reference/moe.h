// CPU reference of the filtered MoE of one expert-parallel rank (spec 8.4 restricted to the rank's
// local experts, 2.5 for the clamped SwiGLU), in fp64 with Eigen. It rounds to bf16 where the GPU
// path stores bf16 (gate_up after GEMM1, the activation), so that the comparison's tolerance bounds
// the differences of fp32 sums and of rounding decisions, not of a precision the device never had.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <vector>

namespace dsv4h::reference {

struct MoeRank {
  int64_t inter = 64;    // I
  int64_t experts = 8;   // E, global
  int64_t ranks = 1;     // R: rank r holds experts [r E/R, (r+1) E/R)
  int64_t rank = 0;
  double route_scale = 1.5;
  double swiglu_limit = 10;
};

// Token rows of the rank's computation are `token * topk + slot`; a row whose expert is not one of
// the rank's (or is -1, a padded token) is filtered.
struct MoeRankResult {
  Eigen::VectorXi local_ids;  // [M k]: expert id - r E/R where local, else -1
  Eigen::MatrixXd gate_up;    // [M k, 2I]: bf16(W13[e] x); zeros on filtered rows
  Eigen::MatrixXd act;        // [M k, I]: bf16(silu(min(g, L)) clamp(u, -L, L)); valid where kept
  std::vector<bool> kept;     // [M k]
  Eigen::MatrixXd down;       // [M k, H]: w W2[e] act; zeros on filtered rows
  Eigen::MatrixXd out;        // [M, H]: route_scale * sum over the token's rows, the rank's partial
};

// hidden [M, H]; topk_ids [M, k] global ids, -1 = padded; topk_weights [M, k];
// gate_up_weights[e] [2I, H] (gate rows [0, I), up rows [I, 2I)) and down_weights[e] [H, I] for
// every local expert e (other entries are not read and may be empty).
MoeRankResult moe_rank(const MoeRank& rank, const Eigen::MatrixXd& hidden, const Eigen::MatrixXi& topk_ids,
                       const Eigen::MatrixXd& topk_weights, const std::vector<Eigen::MatrixXd>& gate_up_weights,
                       const std::vector<Eigen::MatrixXd>& down_weights);

}  // namespace dsv4h::reference
