// CPU reference of the MTP (draft) row expansion (spec 7, review finding 3): draft queries are
// request-major, [r0b0, r0b1, ..., r0b(k-1), r1b0, ...], so every per-request metadata row is
// repeated topk times in place (torch's repeat_interleave(topk, dim=0)), never zero-padded.
#pragma once

#include <cstdint>

#include "attn_metadata.h"

namespace dsv4h::reference {

// Row r of `per_request` becomes rows [r * topk, (r + 1) * topk). The output size is an argument,
// as with repeat_interleave's output_size (no implicit sum): it must equal rows * topk.
// Throws std::invalid_argument on topk < 1 or a wrong output_rows.
IndexMatrix repeat_interleave(const IndexMatrix& per_request, int64_t topk, int64_t output_rows);

// Every field of the metadata, expanded as above.
AttnMetadata expand_for_mtp(const AttnMetadata& per_request, int64_t topk, int64_t output_rows);

}  // namespace dsv4h::reference
