// MTP draft-row expansion: expanded[row] = per_request[row / topk] for every field (spec 7).
//
// Grid and block: one block of 128 threads per output row, each thread copying strided columns
// of every field in turn, so writes are coalesced and the widest field (c4_sparse_page_indices,
// 512 or 1024 columns) takes a few passes. Output rows are bs * topk (at most a few thousand), so
// a block per row fills the device; the grid depends only on the arguments, fixed at capture.
//
// Mutant MTP_ZERO_PAD (review finding 3): the per-request rows copied once, in order, and the rest
// zero-padded, as _pad_tensor_to_size(..., value=0) does; right only for topk = 1. NOOP does nothing.
#include "mtp_expand.h"

#include <string>

namespace dsv4h {
namespace {

constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads) mtp_expand(MtpExpandArgs a) {
#if defined(DSV4H_MUTANT_NOOP)
  if (a.output_rows >= 0) return;
#endif
  const int64_t row = blockIdx.x;
#if defined(DSV4H_MUTANT_MTP_ZERO_PAD)
  const int64_t source = row < a.requests ? row : -1;
#else
  const int64_t source = row / a.topk;
#endif
  for (int f = 0; f < a.num_fields; ++f) {
    const int64_t cols = a.cols[f];
    for (int64_t c = threadIdx.x; c < cols; c += kThreads)
      a.expanded[f][row * cols + c] = source >= 0 ? a.per_request[f][source * cols + c] : 0;
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
  mtp_expand<<<static_cast<unsigned>(args.output_rows), kThreads, 0, stream>>>(args);
  DSV4H_LAUNCH_CHECK("mtp_expand");
}

}  // namespace dsv4h
