// The nightly report as one self-contained HTML page: inline CSS and SVG, no scripts, fonts or
// network. The device and the counts of slower, faster and unchanged benchmarks first; then a
// table of verdicts (regressions first) for our kernels and one for the floors and ceilings; then
// per benchmark one <svg> chart: the median time per night with its noise band (the spread between
// processes) above, the fraction of the copy ceiling below, the dates along the axis, the baseline
// and any step change marked.
#pragma once

#include <string>

#include "summary.h"

namespace dsv4h::report {

std::string render_html(const HistorySummary& s);

}  // namespace dsv4h::report
