// CPU reference of the expert-filtered SwiGLU activation (spec 8.2), in fp64 with Eigen.
#pragma once

#include <Eigen/Dense>
#include <cstdint>
#include <vector>

namespace dsv4h::reference {

// gate_up: [rows, 2 * inter], gate = columns [0, inter), up = [inter, 2 * inter).
// expert_ids: one id per block of expert_step rows; -1 = filtered.
// Returns which rows are kept; writes out.row(r) = silu(min(g, L)) * clamp(u, -L, L) for those
// rows only (L = swiglu_limit; 0 = no clamp). A NaN input propagates, as in torch's clamp.
std::vector<bool> filtered_silu_mul(const Eigen::MatrixXd& gate_up, const Eigen::VectorXi& expert_ids,
                                    int64_t expert_step, double swiglu_limit, Eigen::MatrixXd& out);

}  // namespace dsv4h::reference
