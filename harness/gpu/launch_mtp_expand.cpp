#include "../../kernels/mtp_expand.h"
#include "../components/mtp_expand.h"
#include "launchers.h"

namespace dsv4h {

// Every field of the case in one launch; inputs and outputs share the field names.
void launch_mtp_expand_case(const Case& c, const DeviceTensorMap& inputs, DeviceTensorMap& outputs, void* stream) {
  MtpExpandArgs args{};
  args.requests = c.integer("bs");
  args.topk = c.integer("topk");
  args.output_rows = args.requests * args.topk;
  for (const reference::MetadataField& field : mtp_expand_fields(c)) {
    if (args.num_fields == kMtpMaxFields) throw std::invalid_argument("mtp_expand: more than 16 fields");
    args.per_request[args.num_fields] = inputs.data<const int32_t>(field.name);
    args.expanded[args.num_fields] = outputs.data<int32_t>(field.name);
    const Shape& shape = inputs.at(field.name).shape;
    args.cols[args.num_fields] = shape.size() == 2 ? shape[1] : 1;
    ++args.num_fields;
  }
  launch_mtp_expand(args, static_cast<hipStream_t>(stream));
}

}  // namespace dsv4h
