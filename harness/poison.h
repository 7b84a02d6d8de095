// Poison: every output is filled with a recognisable pattern before a run, so an element nobody
// wrote is caught. Two variants (different NaN payloads / integer sentinels) let a GPU run be
// repeated and reads of unwritten memory show up as a difference.
#pragma once

#include <cstdint>

#include "tensor.h"

namespace dsv4h {

enum class Poison { a, b };

uint64_t poison_bits(DType dtype, Poison variant);
void fill_poison(HostTensor& t, Poison variant);
bool is_poison(const HostTensor& t, int64_t i, Poison variant);
void fill_poison(TensorMap& tensors, Poison variant);

}  // namespace dsv4h
