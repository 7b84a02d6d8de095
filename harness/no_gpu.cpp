// The CPU build's side of the GPU layer: no backend, and a plain reason why.
#include "gpu_backend.h"

namespace dsv4h {

std::unique_ptr<GpuBackend> open_gpu_backend(std::string& why_not) {
  why_not = "this dsv4h was built without GPU kernels (cpu preset); build the cuda or hip preset";
  return nullptr;
}

}  // namespace dsv4h
