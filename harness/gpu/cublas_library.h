// cuBLAS loaded at run time (dlopen), not linked: the packed executables must start on a GPU machine
// whose loader path lacks the toolkit's libcublas, and only what multiplies matrices needs it (the
// dense bf16 floor, the model's GPU forward). Found as $DSV4H_CUBLAS (a path), else
// libcublas.so.N (N the build's cuBLAS major version) or libcublas.so on the loader's path
// (ci/gpu-suite points DSV4H_CUBLAS at the CUDA toolkit's or PyTorch's nvidia-cublas wheel's copy).
// NVIDIA builds only.
#pragma once

#include <cublas_v2.h>

namespace dsv4h {

struct CublasLibrary {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSetMathMode) set_math_mode = nullptr;
  decltype(&cublasSetWorkspace_v2) set_workspace = nullptr;
  // cublasGemmEx's C signature (C++ sees an overload too, which decltype cannot pick).
  cublasStatus_t (*gemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
                         cudaDataType, int, const void*, cudaDataType, int, const void*, void*, cudaDataType, int,
                         cublasComputeType_t, cublasGemmAlgo_t) = nullptr;

  // The process's one copy, loaded on first use; std::runtime_error saying where it looked (and
  // naming `user`) when no cuBLAS can be loaded. The library stays loaded: it registers exit handlers.
  static const CublasLibrary& get(const char* user);
};

}  // namespace dsv4h
