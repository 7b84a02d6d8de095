#include "dense_gemm_floor.h"

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(DSV4H_GPU_NVIDIA)
#include "harness/gpu/cublas_library.h"
#endif

namespace dsv4h {

#if defined(DSV4H_GPU_NVIDIA)
struct DenseGemmFloor::Library {
  const CublasLibrary* blas = nullptr;
  cublasHandle_t handle = nullptr;
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
};

namespace {

// `count` bf16 values, uniform in [-1, 1) from a fixed LCG: random bits keep the card's power (and
// clocks) what real data gives, where zeros would flatter it.
void* random_bf16(int64_t count) {
  std::vector<uint16_t> host(static_cast<size_t>(count));
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  for (uint16_t& v : host) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const float x = static_cast<float>(static_cast<int32_t>(state >> 33) % 65536) / 32768.f - 1.f;
    uint32_t bits;
    std::memcpy(&bits, &x, 4);
    v = static_cast<uint16_t>(bits >> 16);
  }
  void* device = nullptr;
  DSV4H_HIP_CHECK(hipMalloc(&device, host.size() * 2));
  DSV4H_HIP_CHECK(hipMemcpy(device, host.data(), host.size() * 2, hipMemcpyHostToDevice));
  return device;
}

}  // namespace

DenseGemmFloor::DenseGemmFloor(int64_t m, int64_t n, int64_t k, hipStream_t stream)
    : m_(m), n_(n), k_(k), library_(std::make_unique<Library>()) {
  Library& l = *library_;
  l.blas = &CublasLibrary::get("dense bf16 floor");
  if (l.blas->create(&l.handle) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("dense bf16 floor: cublasCreate failed");
  if (l.blas->set_stream(l.handle, stream) != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error("dense bf16 floor: cublasSetStream failed");
  l.a = random_bf16(m * k);
  l.b = random_bf16(k * n);
  DSV4H_HIP_CHECK(hipMalloc(&l.c, static_cast<size_t>(m * n) * 2));
}

DenseGemmFloor::~DenseGemmFloor() {
  Library& l = *library_;
  if (l.handle) l.blas->destroy(l.handle);
  for (void* p : {l.a, l.b, l.c})
    if (p) (void)hipFree(p);
}

void DenseGemmFloor::run() {
  Library& l = *library_;
  const float one = 1.f, zero = 0.f;
  // Column-major C^T[n, m] = B^T[n, k] A^T[k, m]: row-major C = A B.
  const cublasStatus_t status =
      l.blas->gemm(l.handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n_), static_cast<int>(m_), static_cast<int>(k_), &one,
             l.b, CUDA_R_16BF, static_cast<int>(n_), l.a, CUDA_R_16BF, static_cast<int>(k_), &zero, l.c, CUDA_R_16BF,
             static_cast<int>(n_), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (status != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("dense bf16 floor: cublasGemmEx failed");
}
#else
struct DenseGemmFloor::Library {};

DenseGemmFloor::DenseGemmFloor(int64_t m, int64_t n, int64_t k, hipStream_t)
    : m_(m), n_(n), k_(k) {
  throw std::runtime_error("dense bf16 floor: no BLAS on this platform");
}
DenseGemmFloor::~DenseGemmFloor() = default;
void DenseGemmFloor::run() {}
#endif

}  // namespace dsv4h
