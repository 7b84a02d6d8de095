// The dsv4h commands; each takes the arguments after its name and returns the exit code.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../gpu_backend.h"

namespace dsv4h {
const char* build_commit();  // the commit this dsv4h was built from (generated: cmake/version.cmake)
}  // namespace dsv4h

namespace dsv4h::cli {

int cmd_list(const std::vector<std::string>& argv);
int cmd_verify(const std::vector<std::string>& argv);
int cmd_run(const std::vector<std::string>& argv);
int cmd_report(const std::vector<std::string>& argv);
int cmd_fuzz(const std::vector<std::string>& argv);

// The tiny model's CPU reference (cmd_model.cpp): `run --case 'model(...)'` and `verify --component model`.
class Args;
bool is_model_case(const std::string& text);
int run_model_case(const Args& args, const std::string& text);
int verify_model(const Args& args, const std::function<bool(const std::string&)>& selected);
// What the model's GPU run exercises: the kernel sources of every component, and its own.
std::vector<std::string> model_kernel_sources();

// --backend cpu|gpu|auto: the GPU backend to use, or null for the reference alone. `note` says why
// the GPU is not used when it is not. A forced gpu that cannot be opened is a UsageError.
std::unique_ptr<GpuBackend> choose_backend(const std::string& backend, std::string& note);

}  // namespace dsv4h::cli
