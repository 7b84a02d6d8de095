// `dsv4h run --case 'model(...)' --inject OP`: bisection shown on the CPU (issue 31). The candidate
// is the reference forward run step by step across the requests (as a batch runs them) with one
// op's outputs perturbed (model/fault_injection.h); bisection must name that op. Prints every op's
// local error, budget, share used and drift; --json writes them, --fixture the first divergent
// op's component fixture.
#pragma once

#include <string>

#include "args.h"
#include "model/backend.h"

namespace dsv4h::cli {

int run_model_bisection(const Args& args, const std::string& case_text, const model::ReferenceModel& model,
                        const model::RunPlan& plan);

}  // namespace dsv4h::cli
