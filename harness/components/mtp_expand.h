// The fields an mtp_expand case expands (its inputs and outputs share their names), for the GPU binding.
#pragma once

#include <vector>

#include "../../reference/attn_metadata.h"
#include "../case_spec.h"

namespace dsv4h {

std::vector<reference::MetadataField> mtp_expand_fields(const Case& c);

}  // namespace dsv4h
