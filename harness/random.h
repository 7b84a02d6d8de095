// Seeded inputs. The generator and the distributions are our own (splitmix64, Box-Muller), so a
// seed names the same inputs on every machine and standard library.
#pragma once

#include <cstdint>

#include "tensor.h"

namespace dsv4h {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next();
  // The generator `draws` calls of next() further on: splitmix64's state only counts, so a long
  // stream can be made in pieces side by side, each piece the numbers the stream has there.
  Rng ahead(uint64_t draws) const {
    Rng r(*this);
    r.state_ += draws * kGamma;
    return r;
  }
  double uniform();                         // [0, 1)
  double normal();                          // mean 0, standard deviation 1
  int64_t integer(int64_t lo, int64_t hi);  // [lo, hi]

 private:
  static constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ull;
  uint64_t state_;
};

void fill_normal(HostTensor& t, Rng& rng, double mean, double stddev);
void fill_uniform(HostTensor& t, Rng& rng, double lo, double hi);
void fill_integers(HostTensor& t, Rng& rng, int64_t lo, int64_t hi);
// Values that break careless kernels around a clamp `limit`: exactly +-limit, one bf16 step either
// side of it, far beyond it (+-2 limit, +-100), large negatives where silu underflows to -0,
// signed zeros and subnormals, mixed with normal values of scale `limit`.
void fill_adversarial(HostTensor& t, Rng& rng, double limit);

}  // namespace dsv4h
