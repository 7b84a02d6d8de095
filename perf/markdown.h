// The nightly report as a markdown summary for pull requests: the table of verdicts of the
// latest night against the baseline, regressions first, with the step change of each benchmark.
#pragma once

#include <string>

#include "summary.h"

namespace dsv4h::report {

std::string render_markdown(const HistorySummary& s);

}  // namespace dsv4h::report
