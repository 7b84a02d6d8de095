// The CPU build's side of the GPU forward: none, and a plain reason why.
#include "gpu_forward.h"

namespace dsv4h::model {

std::unique_ptr<ModelBackend> open_gpu_forward(const ReferenceModel&, const GpuForwardOptions&, std::string& why_not) {
  why_not = "this build has no GPU: the model's GPU forward is built by the cuda and hip presets (this is the cpu preset)";
  return nullptr;
}

}  // namespace dsv4h::model
