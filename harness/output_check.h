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
  // The reference's tensor (an output or an input) the comparator reads beside the output:
  //   topk_set: each row's candidate scores;
  //   row_rel_l2 (optional), for sums whose terms cancel: each element's sum of its terms'
  //   magnitudes, sum |t_i|; a row's error is then relative to this tensor's row norm where that
  //   is the larger. Why: the class's row bound models the error as a random walk over the partial
  //   sums (tolerance.cpp), which the expected row's norm bounds only where the terms do not
  //   cancel; every partial sum is at most sum |t_i| in magnitude, cancelling or not, so the same
  //   bound holds relative to these magnitudes (as Higham 3.1's gamma_K sum |t_i| per element).
  std::string scores;
};

}  // namespace dsv4h
