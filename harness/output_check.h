// How one output of a component is compared with the reference: its tolerance class (the audited
// table in tolerance.h) and its comparator. A component's descriptor names one per output; an
// output it does not name is compared elementwise under its dtype's class.
#pragma once

#include <cstdint>
#include <string>

#include "tolerance.h"

namespace dsv4h {

enum class Comparator {
  elementwise,  // every element within the class's per-element bound
  row_rel_l2,   // per row (first dimension), ||got - expected|| / ||expected|| within the class's bound
  topk_set,     // per row, the same set of indices, except swaps among entries whose reference
                // scores (output or input `scores`) are equal within the score tolerance
};

struct OutputCheck {
  ToleranceClass tolerance = ToleranceClass::exact;
  Comparator comparator = Comparator::elementwise;
  int64_t accumulated_terms = 0;  // K of an fp32 accumulation over K terms; 0 where none
  std::string scores;             // topk_set: the tensor of each row's candidate scores
};

}  // namespace dsv4h
