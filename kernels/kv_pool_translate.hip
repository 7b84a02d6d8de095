// The step's location translation (spec 5.2, 5.4): swa_out_loc = full_to_swa[out_cache_loc] with
// -1 kept as -1 (decided before indexing), and the c4 / c128 out locations by arithmetic. It runs
// once per forward step, in the step's metadata, so that every layer's store reads the same
// translation and the pool holds no translation state between calls.
//
// Mutant DSV4H_MUTANT_POOL_MINUS_ONE_WRAPAROUND indexes -1 through Python-style wraparound (the
// last mapping entry), as spec 5.5 warns; DSV4H_MUTANT_NOOP writes nothing.
#include <string>

#include "kv_pool.h"
#include "kv_pool_launch.h"

namespace dsv4h {

namespace {

constexpr int kThreads = 256;

__global__ void __launch_bounds__(kThreads) kv_translate(KvStepLocations step, int32_t* swa_destination) {
#if defined(DSV4H_MUTANT_NOOP)
  if (step.tokens >= 0) return;
#endif
  const int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x;
  if (i >= step.tokens) return;
  const int32_t loc = step.out_cache_loc[i];
  // A location outside the map is bad input the harness refuses before any launch; here it goes
  // to the sink (0, which stores nothing) so that the read stays in bounds.
  const bool in_map = loc >= 0 && loc < step.full_slots;
#if defined(DSV4H_MUTANT_POOL_MINUS_ONE_WRAPAROUND)
  swa_destination[i] = step.full_to_swa[loc < 0 ? loc + step.full_slots : loc];
#else
  swa_destination[i] = loc == -1 ? -1 : (in_map ? step.full_to_swa[loc] : 0);
#endif
  if (step.c4_out_loc == nullptr) return;  // the SWA-only translation (see launch_kv_translate_swa)
  const int32_t len = step.seq_lens[i];
  step.c4_out_loc[i] = in_map && len % 4 == 0 ? loc / 4 : 0;
  step.c128_out_loc[i] = in_map && len % 128 == 0 ? loc / 128 : 0;
}

void check_step(const KvStepLocations& step) {
  kv_require(step.tokens >= 0, "tokens must be >= 0, got " + std::to_string(step.tokens));
  kv_require(step.full_slots > 0 && step.full_slots <= INT32_MAX, "full_slots must be in [1, 2^31), got " +
                                                                       std::to_string(step.full_slots));
  kv_require(step.tokens == 0 || (step.full_to_swa && step.out_cache_loc && step.seq_lens), "null step input");
}

}  // namespace

// One thread per row: a row is 3 loads and 3 stores, so the step is one short launch whose cost is
// its launch latency at decode sizes and its coalesced int32 traffic at prefill sizes.
void launch_kv_translate(const KvStepLocations& step, hipStream_t stream) {
  check_step(step);
  if (step.tokens == 0) return;
  kv_require(step.swa_out_loc && step.c4_out_loc && step.c128_out_loc, "null step output");
  kv_translate<<<static_cast<unsigned>((step.tokens + kThreads - 1) / kThreads), kThreads, 0, stream>>>(step, step.swa_out_loc);
  DSV4H_LAUNCH_CHECK("kv_translate");
}

void launch_kv_translate_swa(const KvStepLocations& step, int32_t* destination, hipStream_t stream) {
  check_step(step);
  if (step.tokens == 0) return;
  kv_require(destination != nullptr, "null translation destination");
  KvStepLocations swa_only = step;
  swa_only.c4_out_loc = swa_only.c128_out_loc = nullptr;
  kv_translate<<<static_cast<unsigned>((step.tokens + kThreads - 1) / kThreads), kThreads, 0, stream>>>(swa_only, destination);
  DSV4H_LAUNCH_CHECK("kv_translate (swa only)");
}

}  // namespace dsv4h
