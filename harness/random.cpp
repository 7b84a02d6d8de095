#include "random.h"

#include <cmath>

namespace dsv4h {

uint64_t Rng::next() {
  uint64_t z = (state_ += kGamma);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

double Rng::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]: log stays finite
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

int64_t Rng::integer(int64_t lo, int64_t hi) {
  const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  return lo + static_cast<int64_t>(span ? next() % span : next());
}

void fill_normal(HostTensor& t, Rng& rng, double mean, double stddev) {
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, mean + stddev * rng.normal());
}

void fill_uniform(HostTensor& t, Rng& rng, double lo, double hi) {
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, lo + (hi - lo) * rng.uniform());
}

void fill_integers(HostTensor& t, Rng& rng, int64_t lo, int64_t hi) {
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, static_cast<double>(rng.integer(lo, hi)));
}

void fill_adversarial(HostTensor& t, Rng& rng, double limit) {
  const double step = limit * 0x1.0p-7;
  const double specials[] = {limit,       -limit,      limit + step, limit - step, -limit - step,
                             -limit + step, 2 * limit, -2 * limit,  100.0,        -100.0,
                             -90.0,       0.0,         -0.0,         1e-40,        -1e-40};
  const int64_t num_specials = sizeof(specials) / sizeof(specials[0]);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int64_t pick = rng.integer(0, 2 * num_specials - 1);
    t.set(i, pick < num_specials ? specials[pick] : limit * rng.normal());
  }
}

}  // namespace dsv4h
