// `dsv4h run --case 'model(...)' --inject OP` and `--backend gpu`: bisection of a candidate forward
// against the reference (issue 31). The candidate is the GPU forward (model/gpu/gpu_forward.h) where
// `gpu` is given, else the reference forward run step by step across the requests (as a batch runs
// them); with --inject, one op's outputs are perturbed in it (model/fault_injection.h; the GPU
// forward goes on from the perturbed values on the device) and bisection must name that op. Prints
// every op's local error, budget, share used and drift; --json writes them, --fixture the first
// divergent op's component fixture. Exit 1 where an op crosses its budget.
#pragma once

#include <string>

#include "args.h"
#include "model/backend.h"

namespace dsv4h::cli {

int run_model_bisection(const Args& args, const std::string& case_text, const model::ReferenceModel& model,
                        const model::RunPlan& plan, const model::ModelBackend* gpu = nullptr);

}  // namespace dsv4h::cli
