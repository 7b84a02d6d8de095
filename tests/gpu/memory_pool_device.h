// Device-level pieces of memory_pool steps for the GPU tests that compose steps themselves (two
// batches interleaved layer by layer, a pool that lives across many steps). Rows [begin, end) of
// a case's inputs form one batch.
#pragma once

#include "harness/components/memory_pool.h"
#include "harness/gpu/launchers.h"

namespace dsv4h::testing {

// The step view of rows [begin, end): inputs from `inputs`, metadata into `outputs`'s location arrays.
inline KvStepLocations pool_step(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, int64_t begin,
                                 int64_t end) {
  const MemoryPoolSizes s = memory_pool_sizes(c);
  KvStepLocations step;
  step.full_to_swa = inputs.data<const int32_t>("full_to_swa");
  step.full_slots = s.full_slots();
  step.out_cache_loc = inputs.data<const int32_t>("out_cache_loc") + begin;
  step.seq_lens = inputs.data<const int32_t>("seq_lens") + begin;
  step.tokens = end - begin;
  step.swa_out_loc = outputs.data<int32_t>("swa_out_loc") + begin;
  step.c4_out_loc = outputs.data<int32_t>("c4_out_loc") + begin;
  step.c128_out_loc = outputs.data<int32_t>("c128_out_loc") + begin;
  return step;
}

inline KvLayerStore pool_layer(const Case& c, const DeviceTensorMap& inputs, int layer, int64_t begin) {
  KvLayerStore l = memory_pool_layer(c, inputs, layer);
  l.kv += begin * 512;
  l.compressed_kv += begin * 512;
  l.index_k += begin * 128;
  return l;
}

}  // namespace dsv4h::testing
