// Test-only access to the compressor descriptor's reference computing with one of issue 29's bugs
// (reference/compressor.h, CompressorBug): tests/cpu/test_compressor_reference.cpp shows that each
// bug changes some verify case's outputs. No case parameter reaches it: a user cannot plant a bug.
#pragma once

#include "../../reference/compressor.h"
#include "../component.h"

namespace dsv4h {

// The reference of compressor case `c` on `inputs`, computed with `bug`, into `outputs` (as the
// descriptor's reference writes them: what it leaves alone keeps what `outputs` held).
void compressor_reference_with_bug(const Case& c, const TensorMap& inputs, TensorMap& outputs,
                                   reference::CompressorBug bug);

}  // namespace dsv4h
