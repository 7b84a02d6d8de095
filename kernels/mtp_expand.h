// Launch wrapper of the MTP draft-row expansion (spec 7, review finding 3): per-request metadata
// rows repeated topk times in place, request-major (torch's repeat_interleave(topk, dim=0) with
// output_size given), for several int32 fields in one graph-capturable launch.
#pragma once

#include <cstdint>

#include "portability.h"

namespace dsv4h {

constexpr int kMtpMaxFields = 16;

struct MtpExpandArgs {
  int num_fields;
  const int32_t* per_request[kMtpMaxFields];  // field f: [requests, cols[f]]
  int32_t* expanded[kMtpMaxFields];           // field f: [output_rows, cols[f]]
  int64_t cols[kMtpMaxFields];
  int64_t requests;
  int64_t topk;
  int64_t output_rows;  // must be requests * topk: the size is an argument, never a device sum
};

// Throws std::invalid_argument naming the field on impossible sizes; enqueues one kernel.
void launch_mtp_expand(const MtpExpandArgs& args, hipStream_t stream);

}  // namespace dsv4h
