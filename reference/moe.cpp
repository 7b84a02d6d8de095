#include "moe.h"

#include "filtered_silu_mul.h"
#include "narrow_float.h"

namespace dsv4h::reference {
namespace {

double to_bf16(double value) { return bf16_to_float(double_to_bf16(value)); }

}  // namespace

MoeRankResult moe_rank(const MoeRank& rank, const Eigen::MatrixXd& hidden, const Eigen::MatrixXi& topk_ids,
                       const Eigen::MatrixXd& topk_weights, const std::vector<Eigen::MatrixXd>& gate_up_weights,
                       const std::vector<Eigen::MatrixXd>& down_weights) {
  const Eigen::Index tokens = hidden.rows(), hidden_size = hidden.cols(), topk = topk_ids.cols();
  const Eigen::Index rows = tokens * topk;
  const int64_t local_experts = rank.experts / rank.ranks, first = rank.rank * local_experts;
  MoeRankResult r;
  r.local_ids.resize(rows);
  for (Eigen::Index m = 0; m < tokens; ++m)
    for (Eigen::Index s = 0; s < topk; ++s) {
      const int64_t id = topk_ids(m, s);
      r.local_ids[m * topk + s] = id >= first && id < first + local_experts ? static_cast<int>(id - first) : -1;
    }

  r.gate_up = Eigen::MatrixXd::Zero(rows, 2 * rank.inter);
  for (Eigen::Index row = 0; row < rows; ++row) {
    const int e = r.local_ids[row];
    if (e < 0) continue;
    const Eigen::VectorXd g = gate_up_weights[first + e] * hidden.row(row / topk).transpose();
    r.gate_up.row(row) = g.unaryExpr(&to_bf16).transpose();
  }
  r.act = Eigen::MatrixXd::Zero(rows, rank.inter);
  r.kept = filtered_silu_mul(r.gate_up, r.local_ids, 1, rank.swiglu_limit, r.act);
  r.act = r.act.unaryExpr(&to_bf16);

  r.down = Eigen::MatrixXd::Zero(rows, hidden_size);
  r.out = Eigen::MatrixXd::Zero(tokens, hidden_size);
  for (Eigen::Index row = 0; row < rows; ++row) {
    const int e = r.local_ids[row];
    if (e < 0) continue;
    r.down.row(row) = topk_weights(row / topk, row % topk) * (down_weights[first + e] * r.act.row(row).transpose()).transpose();
    r.out.row(row / topk) += r.down.row(row);
  }
  r.out *= rank.route_scale;
  return r;
}

}  // namespace dsv4h::reference
