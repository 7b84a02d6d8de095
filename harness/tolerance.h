// The tolerance policy: one table of classes, each with its formula and the reason for it, and one
// class per output dtype. Tests never state a literal tolerance; they get it from here.
#pragma once

#include <string>
#include <vector>

#include "dtype.h"

namespace dsv4h {

enum class ToleranceClass { exact, bf16_rounded_once };

struct ToleranceSpec {
  ToleranceClass id;
  std::string name;
  std::string formula;  // the allowed |got - expected| per element
  std::string reason;
};

const std::vector<ToleranceSpec>& tolerance_table();
const ToleranceSpec& tolerance_spec(ToleranceClass id);

// The class an output of this dtype is compared under.
ToleranceClass tolerance_for(DType dtype);

// Allowed |got - expected| for one element whose expected value is `expected`.
double allowed_error(ToleranceClass id, double expected);

}  // namespace dsv4h
