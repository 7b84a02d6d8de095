// The nightly report as one self-contained HTML page: inline CSS and SVG, no scripts, fonts or
// network. A summary table of verdicts (regressions first), then per benchmark one <svg> chart:
// the median time per night above, the fraction of the copy ceiling per night below, the
// baseline and any step change marked.
#pragma once

#include <string>

#include "summary.h"

namespace dsv4h::report {

std::string render_html(const HistorySummary& s);

}  // namespace dsv4h::report
