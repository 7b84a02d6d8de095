// Test-only access to the compressor descriptor's reference computing with one of issue 29's bugs
// (reference/compressor.h, CompressorBug): tests/cpu/test_compressor_reference.cpp shows that each
// bug changes some verify case's outputs. No case parameter reaches it: a user cannot plant a bug.
#pragma once

#include "../../reference/compressor.h"
#include "../component.h"
#include "../poison.h"

namespace dsv4h {

// The reference's outputs of compressor case `c` on `inputs`, computed with `bug`, in outputs
// poisoned with `poison` first (as reference_outputs makes the right ones).
TensorMap compressor_reference_with_bug(const Case& c, const TensorMap& inputs, reference::CompressorBug bug,
                                        Poison poison);

}  // namespace dsv4h
