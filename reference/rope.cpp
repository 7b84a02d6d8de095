#include "rope.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace dsv4h::reference {
namespace {

constexpr double kPi = 3.14159265358979323846;
constexpr double kOriginalSeqLen = 65536, kYarnFactor = 16, kBetaFast = 32, kBetaSlow = 1;

// The pair index whose wavelength turns `rotations` times over the original context.
double correction_dim(double rotations, double base) {
  return kRopeDim * std::log(kOriginalSeqLen / (rotations * 2 * kPi)) / (2 * std::log(base));
}

}  // namespace

RopeConfig rope_for_ratio(int64_t compress_ratio) {
  if (compress_ratio == 0) return {10000, false};
  if (compress_ratio == 4 || compress_ratio == 128) return {160000, true};
  throw std::invalid_argument("rope_for_ratio: compress ratio must be 0, 4 or 128");
}

Eigen::VectorXd rope_frequencies(const RopeConfig& config) {
  const int pairs = kRopeDim / 2;
  Eigen::VectorXd f(pairs);
  for (int i = 0; i < pairs; ++i) f(i) = std::pow(config.base, -2.0 * i / kRopeDim);
  if (!config.yarn) return f;
  const double low = std::max(std::floor(correction_dim(kBetaFast, config.base)), 0.0);
  double high = std::min(std::ceil(correction_dim(kBetaSlow, config.base)), kRopeDim - 1.0);
  if (high == low) high += 0.001;
  for (int i = 0; i < pairs; ++i) {
    const double smooth = 1 - std::clamp((i - low) / (high - low), 0.0, 1.0);
    f(i) = f(i) / kYarnFactor * (1 - smooth) + f(i) * smooth;
  }
  return f;
}

void apply_rope(Eigen::Ref<Eigen::VectorXd> x, int64_t pos, const Eigen::VectorXd& freqs, bool inverse) {
  if (x.size() != kRopeDim || freqs.size() != kRopeDim / 2)
    throw std::invalid_argument("apply_rope: expects 64 values and 32 frequencies");
  for (int i = 0; i < kRopeDim / 2; ++i) {
    const double angle = static_cast<double>(pos) * freqs(i) * (inverse ? -1 : 1);
    const double c = std::cos(angle), s = std::sin(angle), re = x(2 * i), im = x(2 * i + 1);
    x(2 * i) = re * c - im * s;
    x(2 * i + 1) = re * s + im * c;
  }
}

}  // namespace dsv4h::reference
