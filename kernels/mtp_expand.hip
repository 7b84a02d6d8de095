// MTP draft-row expansion: expanded[row] = per_request[row / topk] for every field (spec 7).
//
// The kernel is latency-bound (a row is a few KB at most): its time is the chain a thread waits
// on from its start to its store. Measured on the H200 (graph replays, device time): a node that
// reads one kernel parameter, loads and stores costs 1.84 us against an empty node's 1.40, and
// each further 64-byte line of kernel parameters on that chain adds up to 0.06 us; a 32-bit
// division is a chain of about 15 dependent instructions. So:
// - The launch wrapper lays the fields' per-request arrays end to end as one flat range of work
//   units: 4 columns (one 16-byte access) where the width is a multiple of 4 and both addresses
//   are aligned, else 1 column. Thread i loads unit i and stores it into the topk rows that repeat
//   its request: consecutive threads load and store consecutive units, coalesced across row
//   boundaries, and a value is read once, not topk times, with no division by topk. Against one
//   thread per output unit, on the H200 (6 rounds of ci/gpu-experiment): bs 1 0.13-0.26 us faster at
//   topk 1, bs 64 and 256 with every field at topk 4 0.10 and 0.41 us faster, the rest within
//   +-0.08 us, unclear (reports/gpu/2026-12-03-9f34ada-h200-ab-mtp-source-major.json).
// - A unit's field is counted from the fields' first units, 16 values in one parameter line,
//   without a loop-carried chain; then one read of the field's own record. Each field's units
//   start at a multiple of 32, so a warp reads one record: lanes reading different records of the
//   parameters are served one record after the other (bs 1, all 16 fields: 2.14 -> 1.92 us at
//   topk 1, 5 of 6 rounds faster, one tied; reports/gpu/2026-12-03-212193b-h200-ab-mtp-warp-fields.json).
// - The division by a row's units is a multiplication by a magic number computed on the host
//   (exact for dividends below 2^31, which the wrapper guarantees).
// One unit per thread measured fastest (2 and 4 in flight per thread were slower at bs 256), and
// blocks of 128 threads: 512 were slower at bs 64-256, 64 at bs 256, 256 unclear
// (reports/gpu/2026-12-03-9f34ada-h200-ab-mtp-block*.json, against the row-major kernel).
//
// Grid: ceil(units / kThreads) blocks, a function of the arguments only, fixed at capture.
//
// Mutant MTP_ZERO_PAD (review finding 3): the per-request rows copied once, in order, and the rest
// zero-padded, as _pad_tensor_to_size(..., value=0) does (a unit's copies j > 0 go to the padding
// rows as zeros); right only for topk = 1. NOOP does nothing.
#include "mtp_expand.h"

#include <string>

#include "divider.h"

namespace dsv4h {
namespace {

constexpr int kThreads = 128;
#if defined(DSV4H_MUTANT_MTP_ZERO_PAD)
constexpr bool kZeroPadMutant = true;
#else
constexpr bool kZeroPadMutant = false;
#endif

// One field as a range of work units (32 bytes: a field's record is one aligned read).
struct FieldUnits {
  const int32_t* per_request;  // [requests, cols]
  int32_t* expanded;           // [output_rows, cols]
  uint32_t row_units;          // units a row: cols / width
  Divider by_row_units;
  uint32_t width;              // columns a unit: 4 or 1; cols = row_units * width
};

struct ExpandKernelArgs {
  uint32_t first[kMtpMaxFields];  // each field's first unit, a multiple of 32; unused fields 2^32 - 1
  uint32_t requests;              // a unit of a request beyond (a gap, or past the last field) does nothing
  uint32_t topk;
  FieldUnits field[kMtpMaxFields];
};

__global__ void __launch_bounds__(kThreads) mtp_expand(ExpandKernelArgs a) {
#if defined(DSV4H_MUTANT_NOOP)
  if (a.topk > 0) return;  // always (the wrapper checks), unknown to the compiler
#endif
  const uint32_t unit = blockIdx.x * kThreads + threadIdx.x;
  int f = 0;
#pragma unroll
  for (int g = 1; g < kMtpMaxFields; ++g) f += unit >= a.first[g];
  const FieldUnits& field = a.field[f];
  const uint32_t local = unit - a.first[f];
  const uint32_t request = divide(local, field.by_row_units);
  if (request >= a.requests) return;
  const size_t row_elems = static_cast<size_t>(field.row_units) * field.width;
  const int32_t* const from = field.per_request + static_cast<size_t>(local) * field.width;
  // Copy j of the unit goes to row request * topk + j (request-major); in the mutant, copy 0 to
  // row `request` and copy j > 0, zeroed, to padding row requests + request (topk - 1) + j - 1.
  const auto row_of_copy = [&](uint32_t j) {
    return !kZeroPadMutant ? request * a.topk + j : j == 0 ? request : a.requests + request * (a.topk - 1) + j - 1;
  };
  const size_t col = static_cast<size_t>(local - request * field.row_units) * field.width;
  int32_t* const to = field.expanded + col;
  // Copy 0 before the loop: at topk 1 (every row its own request) the loop is one test.
  if (field.width == 4) {
    const uint4 v = load_read_only(reinterpret_cast<const uint4*>(from));
    *reinterpret_cast<uint4*>(to + row_of_copy(0) * row_elems) = v;
#pragma unroll 3
    for (uint32_t j = 1; j < a.topk; ++j)
      *reinterpret_cast<uint4*>(to + row_of_copy(j) * row_elems) = kZeroPadMutant ? make_uint4(0, 0, 0, 0) : v;
  } else {
    const int32_t v = load_read_only(from);
    to[row_of_copy(0) * row_elems] = v;
#pragma unroll 3
    for (uint32_t j = 1; j < a.topk; ++j) to[row_of_copy(j) * row_elems] = kZeroPadMutant ? 0 : v;
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
  for (uint32_t& first : k.first) first = UINT32_MAX;
  k.requests = static_cast<uint32_t>(args.requests);
  k.topk = static_cast<uint32_t>(args.topk);
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  int64_t units = 0;
  for (int f = 0; f < args.num_fields; ++f) {
    const int64_t width = args.cols[f] % 4 == 0 && aligned(args.per_request[f]) && aligned(args.expanded[f]) ? 4 : 1;
    const int64_t row_units = args.cols[f] / width;
    units = (units + 31) / 32 * 32;
    // Every unit index fits the kernel's 32-bit arithmetic and its dividers (below 2^31).
    require(units + args.requests * row_units < (int64_t{1} << 31),
            "field " + std::to_string(f) + ": the input passes 2^31 work units (" + std::to_string(args.requests) +
                " rows of " + std::to_string(args.cols[f]) + " columns)");
    k.first[f] = static_cast<uint32_t>(units);
    k.field[f] = FieldUnits{args.per_request[f], args.expanded[f], static_cast<uint32_t>(row_units),
                            divider_for(static_cast<uint32_t>(row_units)), static_cast<uint32_t>(width)};
    units += args.requests * row_units;
  }
  mtp_expand<<<static_cast<unsigned>((units + kThreads - 1) / kThreads), kThreads, 0, stream>>>(k);
  DSV4H_LAUNCH_CHECK("mtp_expand");
}

}  // namespace dsv4h
