#include "mtp_expand.h"

#include <stdexcept>
#include <string>

namespace dsv4h::reference {

IndexMatrix repeat_interleave(const IndexMatrix& per_request, int64_t topk, int64_t output_rows) {
  if (topk < 1) throw std::invalid_argument("mtp_expand: topk must be >= 1, got " + std::to_string(topk));
  if (output_rows != per_request.rows() * topk)
    throw std::invalid_argument("mtp_expand: output_rows " + std::to_string(output_rows) + " != " +
                                std::to_string(per_request.rows()) + " requests x topk " + std::to_string(topk));
  IndexMatrix out(output_rows, per_request.cols());
  for (int64_t row = 0; row < output_rows; ++row) out.row(row) = per_request.row(row / topk);
  return out;
}

AttnMetadata expand_for_mtp(const AttnMetadata& per_request, int64_t topk, int64_t output_rows) {
  AttnMetadata out;
  for (const MetadataField& f : kMetadataFields)
    out.*f.member = repeat_interleave(per_request.*f.member, topk, output_rows);
  return out;
}

}  // namespace dsv4h::reference
