// A floor for compute-bound kernels: the vendor's dense bf16 matrix product, the card's matrix rate
// as a library reaches it, measured in the same run as the kernel it is compared with. On NVIDIA,
// cuBLAS's cublasGemmEx (bf16 in, fp32 accumulation, bf16 out), loaded at run time
// (harness/gpu/cublas_library.h) so that the benchmark binaries need no cuBLAS where this floor is
// not run.
// On AMD no BLAS is in this tree's toolchain: the floor is unavailable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "kernels/portability.h"

namespace dsv4h {

class DenseGemmFloor {
 public:
  // C[m, n] = A[m, k] B[k, n] on random bf16 data, enqueued on `stream`. Throws std::runtime_error
  // saying why where no BLAS can be loaded.
  DenseGemmFloor(int64_t m, int64_t n, int64_t k, hipStream_t stream);
  ~DenseGemmFloor();
  DenseGemmFloor(const DenseGemmFloor&) = delete;
  DenseGemmFloor& operator=(const DenseGemmFloor&) = delete;

  void run();  // one product, enqueued
  double flops() const { return 2.0 * static_cast<double>(m_) * static_cast<double>(n_) * static_cast<double>(k_); }

 private:
  struct Library;
  int64_t m_, n_, k_;
  std::unique_ptr<Library> library_;
};

}  // namespace dsv4h
