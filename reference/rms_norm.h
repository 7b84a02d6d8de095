// RMSNorm (spec 2.3) in fp64: y = w * x / sqrt(mean(x^2) + eps), row by row. Shared by the
// compressor, the q and kv norms and the model forward.
#pragma once

#include <Eigen/Dense>

namespace dsv4h::reference {

Eigen::MatrixXd rms_norm(const Eigen::MatrixXd& rows, const Eigen::VectorXd& weight, double eps);

}  // namespace dsv4h::reference
