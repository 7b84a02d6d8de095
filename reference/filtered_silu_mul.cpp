#include "filtered_silu_mul.h"

#include <cmath>

namespace dsv4h::reference {

std::vector<bool> filtered_silu_mul(const Eigen::MatrixXd& gate_up, const Eigen::VectorXi& expert_ids,
                                    int64_t expert_step, double swiglu_limit, Eigen::MatrixXd& out) {
  const Eigen::Index inter = gate_up.cols() / 2;
  const double L = swiglu_limit;
  const auto clamp_gate = [L](double g) { return L > 0 && g > L ? L : g; };
  const auto clamp_up = [L](double u) { return L > 0 ? (u > L ? L : (u < -L ? -L : u)) : u; };
  const auto silu = [](double g) { return g / (1.0 + std::exp(-g)); };

  std::vector<bool> kept(gate_up.rows());
  for (Eigen::Index r = 0; r < gate_up.rows(); ++r) {
    kept[r] = expert_ids[r / expert_step] != -1;
    if (!kept[r]) continue;
    const Eigen::ArrayXd gate = gate_up.row(r).head(inter).array().unaryExpr(clamp_gate).unaryExpr(silu);
    const Eigen::ArrayXd up = gate_up.row(r).tail(inter).array().unaryExpr(clamp_up);
    out.row(r) = (gate * up).matrix().transpose();
  }
  return kept;
}

}  // namespace dsv4h::reference
