// MTP draft-row expansion: expanded[row] = per_request[row / topk] for every field (spec 7).
//
// The kernel is latency-bound (a row is a few KB at most): its time is the chain a thread waits
// on from its start to its store. Measured on the H200 (graph replays, device time): a node that
// reads one kernel parameter, loads and stores costs 1.84 us against an empty node's 1.40, and
// each further 64-byte line of kernel parameters on that chain adds up to 0.06 us; a 32-bit
// division is a chain of about 15 dependent instructions. So:
// - Each field's output is one contiguous [output_rows, cols] array, and the launch wrapper lays
//   the fields end to end as one flat range of work units: 4 columns (one 16-byte access) where
//   the width is a multiple of 4 and both addresses are aligned, else 1 column. Thread i takes
//   unit i: consecutive threads store consecutive units, coalesced across row boundaries.
// - A unit's field is counted from the fields' first units, 16 values in one parameter line,
//   without a loop-carried chain; then one read of the field's own record. Each field's units
//   start at a multiple of 32, so a warp reads one record: lanes reading different records of the
//   parameters are served one record after the other (bs 1, all 16 fields: 2.14 -> 1.92 us at
//   topk 1, 5 of 6 rounds faster, one tied; reports/gpu/2026-12-03-212193b-h200-ab-mtp-warp-fields.json).
// - Divisions by a row's units and by topk are multiplications by magic numbers computed on the
//   host (exact for dividends below 2^31, which the wrapper guarantees).
// One unit per thread measured fastest (2 and 4 in flight per thread were slower at bs 256).
//
// Grid: ceil(units / kThreads) blocks, a function of the arguments only, fixed at capture.
//
// Mutant MTP_ZERO_PAD (review finding 3): the per-request rows copied once, in order, and the rest
// zero-padded, as _pad_tensor_to_size(..., value=0) does; right only for topk = 1. NOOP does nothing.
#include "mtp_expand.h"

#include <string>

#include "divider.h"

namespace dsv4h {
namespace {

constexpr int kThreads = 128;

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
  uint32_t requests;
  uint32_t output_rows;           // a unit of a row beyond (a gap, or past the last field) does nothing
  Divider by_topk;
  FieldUnits field[kMtpMaxFields];
};

__global__ void __launch_bounds__(kThreads) mtp_expand(ExpandKernelArgs a) {
#if defined(DSV4H_MUTANT_NOOP)
  if (a.output_rows > 0) return;
#endif
  const uint32_t unit = blockIdx.x * kThreads + threadIdx.x;
  int f = 0;
#pragma unroll
  for (int g = 1; g < kMtpMaxFields; ++g) f += unit >= a.first[g];
  const FieldUnits& field = a.field[f];
  const uint32_t local = unit - a.first[f];
  const uint32_t row = divide(local, field.by_row_units);
  if (row >= a.output_rows) return;
  const size_t col = static_cast<size_t>(local - row * field.row_units) * field.width;
  int32_t* const to = field.expanded + static_cast<size_t>(local) * field.width;
#if defined(DSV4H_MUTANT_MTP_ZERO_PAD)
  if (row >= a.requests) {
    if (field.width == 4) *reinterpret_cast<uint4*>(to) = make_uint4(0, 0, 0, 0);
    else *to = 0;
    return;
  }
  const uint32_t source = row;
#else
  const uint32_t source = divide(row, a.by_topk);
#endif
  const int32_t* const from = field.per_request + static_cast<size_t>(source) * field.row_units * field.width + col;
  if (field.width == 4) *reinterpret_cast<uint4*>(to) = load_read_only(reinterpret_cast<const uint4*>(from));
  else *to = load_read_only(from);
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
  k.output_rows = static_cast<uint32_t>(args.output_rows);
  k.by_topk = divider_for(static_cast<uint32_t>(args.topk));
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  int64_t units = 0;
  for (int f = 0; f < args.num_fields; ++f) {
    const int64_t width = args.cols[f] % 4 == 0 && aligned(args.per_request[f]) && aligned(args.expanded[f]) ? 4 : 1;
    const int64_t row_units = args.cols[f] / width;
    units = (units + 31) / 32 * 32;
    // Every unit index fits the kernel's 32-bit arithmetic and its dividers (below 2^31).
    require(units + args.output_rows * row_units < (int64_t{1} << 31),
            "field " + std::to_string(f) + ": the output passes 2^31 work units (" + std::to_string(args.output_rows) +
                " rows of " + std::to_string(args.cols[f]) + " columns)");
    k.first[f] = static_cast<uint32_t>(units);
    k.field[f] = FieldUnits{args.per_request[f], args.expanded[f], static_cast<uint32_t>(row_units),
                            divider_for(static_cast<uint32_t>(row_units)), static_cast<uint32_t>(width)};
    units += args.output_rows * row_units;
  }
  mtp_expand<<<static_cast<unsigned>((units + kThreads - 1) / kThreads), kThreads, 0, stream>>>(k);
  DSV4H_LAUNCH_CHECK("mtp_expand");
}

}  // namespace dsv4h
