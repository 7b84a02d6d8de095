#include "rms_norm.h"

#include <cmath>
#include <stdexcept>

namespace dsv4h::reference {

Eigen::MatrixXd rms_norm(const Eigen::MatrixXd& rows, const Eigen::VectorXd& weight, double eps) {
  if (rows.cols() != weight.size()) throw std::invalid_argument("rms_norm: weight length is not the row width");
  Eigen::MatrixXd y(rows.rows(), rows.cols());
  for (Eigen::Index r = 0; r < rows.rows(); ++r)
    y.row(r) = rows.row(r).cwiseProduct(weight.transpose()) / std::sqrt(rows.row(r).squaredNorm() / rows.cols() + eps);
  return y;
}

}  // namespace dsv4h::reference
