// MTP draft-row expansion: expanded[row] = per_request[row / topk] for every field (spec 7).
//
// The kernel is latency-bound (a row is a few KB at most): its time is the number of memory round
// trips a block makes in a row. A store may alias any later int32 load, so a loop that copies field
// after field, column after column, waits one round trip per field and pass (16 for every field).
// Here the launch wrapper lays a row's fields end to end as work units of 4 columns (one 16-byte
// access) where the width is a multiple of 4 and both addresses are aligned, else of 1 column, and
// thread t takes units t, t + 128, ..., loading four of them before storing any: one round trip for
// rows of up to 2048 int32 (every field at ctx 8192 is 748).
//
// Grid and block: one block of 128 threads per output row. Output rows are bs * topk (at most a
// few thousand), so a block per row fills the device; the grid depends only on the arguments,
// fixed at capture.
//
// Mutant MTP_ZERO_PAD (review finding 3): the per-request rows copied once, in order, and the rest
// zero-padded, as _pad_tensor_to_size(..., value=0) does; right only for topk = 1. NOOP does nothing.
#include "mtp_expand.h"

#include <string>

namespace dsv4h {
namespace {

constexpr int kThreads = 128;
constexpr int kUnitsPerThread = 4;  // units a thread has in flight

// One row of every field as work units (built by the launch wrapper): field f has cols[f]
// columns, in units of width[f] columns (4: one 16-byte access).
struct ExpandKernelArgs {
  int64_t units;  // of all fields
  const int32_t* per_request[kMtpMaxFields];
  int32_t* expanded[kMtpMaxFields];
  int64_t cols[kMtpMaxFields];
  int64_t units_end[kMtpMaxFields];  // units of fields 0..f
  int32_t width[kMtpMaxFields];
  int64_t requests, topk;
};

// The units a thread copies in one pass (units first + threadIdx.x + i * kThreads), loaded.
struct Pass {
  int field[kUnitsPerThread];  // -1: no unit
  int64_t col[kUnitsPerThread];
  uint4 value[kUnitsPerThread];
};

// Locates the thread's units of the pass at `first` and loads them from per-request row `source`
// (-1: none); no stores, so every load is in flight at once.
__device__ __forceinline__ Pass load_pass(const ExpandKernelArgs& a, int64_t first, int64_t source) {
  Pass pass;
  int field = 0;
#pragma unroll
  for (int i = 0; i < kUnitsPerThread; ++i) {
    const int64_t unit = first + i * kThreads + threadIdx.x;
    pass.field[i] = -1;
    pass.col[i] = 0;
    pass.value[i] = make_uint4(0, 0, 0, 0);
    if (unit >= a.units) continue;
    while (unit >= a.units_end[field]) ++field;
    const int64_t col = (unit - (field > 0 ? a.units_end[field - 1] : 0)) * a.width[field];
    pass.field[i] = field;
    pass.col[i] = col;
    if (source < 0) continue;
    const int32_t* const from = a.per_request[field] + source * a.cols[field] + col;
    if (a.width[field] == 4) pass.value[i] = load_read_only(reinterpret_cast<const uint4*>(from));
    else pass.value[i].x = static_cast<uint32_t>(*from);
  }
  return pass;
}

__global__ void __launch_bounds__(kThreads) mtp_expand(ExpandKernelArgs a) {
#if defined(DSV4H_MUTANT_NOOP)
  if (a.requests >= 0) return;
#endif
  const int64_t row = blockIdx.x;
#if defined(DSV4H_MUTANT_MTP_ZERO_PAD)
  const int64_t source = row < a.requests ? row : -1;
#else
  const int64_t source = row / a.topk;
#endif
  for (int64_t first = 0; first < a.units; first += kThreads * kUnitsPerThread) {
    const Pass pass = load_pass(a, first, source);
#pragma unroll
    for (int i = 0; i < kUnitsPerThread; ++i) {
      const int field = pass.field[i];
      if (field < 0) continue;
      int32_t* const to = a.expanded[field] + row * a.cols[field] + pass.col[i];
      const uint4 value = source >= 0 ? pass.value[i] : make_uint4(0, 0, 0, 0);
      if (a.width[field] == 4) *reinterpret_cast<uint4*>(to) = value;
      else *to = static_cast<int32_t>(value.x);
    }
  }
}

void require(bool ok, const std::string& message) {
  if (!ok) throw std::invalid_argument("mtp_expand: " + message);
}

}  // namespace

void launch_mtp_expand(const MtpExpandArgs& args, hipStream_t stream) {
  require(args.topk >= 1, "topk must be >= 1, got " + std::to_string(args.topk));
  require(args.requests >= 0, "requests must be >= 0, got " + std::to_string(args.requests));
  require(args.output_rows == args.requests * args.topk,
          "output_rows " + std::to_string(args.output_rows) + " != requests " + std::to_string(args.requests) +
              " x topk " + std::to_string(args.topk));
  require(args.output_rows <= (int64_t{1} << 24), "output_rows above 2^24");
  require(args.num_fields >= 1 && args.num_fields <= kMtpMaxFields,
          "num_fields must be in [1, " + std::to_string(kMtpMaxFields) + "], got " + std::to_string(args.num_fields));
  for (int f = 0; f < args.num_fields; ++f) {
    require(args.cols[f] >= 1, "field " + std::to_string(f) + ": cols must be >= 1");
    require(args.output_rows == 0 || (args.per_request[f] && args.expanded[f]),
            "field " + std::to_string(f) + ": null device pointer");
  }
  if (args.output_rows == 0) return;
  ExpandKernelArgs k{};
  k.requests = args.requests;
  k.topk = args.topk;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  for (int f = 0; f < args.num_fields; ++f) {
    k.per_request[f] = args.per_request[f];
    k.expanded[f] = args.expanded[f];
    k.cols[f] = args.cols[f];
    k.width[f] = args.cols[f] % 4 == 0 && aligned(args.per_request[f]) && aligned(args.expanded[f]) ? 4 : 1;
    k.units += args.cols[f] / k.width[f];
    k.units_end[f] = k.units;
  }
  mtp_expand<<<static_cast<unsigned>(args.output_rows), kThreads, 0, stream>>>(k);
  DSV4H_LAUNCH_CHECK("mtp_expand");
}

}  // namespace dsv4h
