#include "dense_gemm_floor.h"

#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#if defined(DSV4H_GPU_NVIDIA)
#include <cublas_v2.h>
#endif

namespace dsv4h {

#if defined(DSV4H_GPU_NVIDIA)
// The four cuBLAS entry points the floor uses, resolved from the loaded library.
struct DenseGemmFloor::Library {
  void* handle_so = nullptr;
  cublasHandle_t handle = nullptr;
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  // cublasGemmEx's C signature (C++ sees an overload too, which decltype cannot pick).
  cublasStatus_t (*gemm)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*, const void*,
                         cudaDataType, int, const void*, cudaDataType, int, const void*, void*, cudaDataType, int,
                         cublasComputeType_t, cublasGemmAlgo_t) = nullptr;
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
};

namespace {

void* open_cublas() {
  std::vector<std::string> names;
  if (const char* path = std::getenv("DSV4H_CUBLAS")) names.emplace_back(path);
  names.insert(names.end(), {"libcublas.so.13", "libcublas.so.12", "libcublas.so"});
  for (const std::string& name : names)
    if (void* so = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return so;
  throw std::runtime_error("dense bf16 floor: no cuBLAS found (set DSV4H_CUBLAS to libcublas.so's path, or LD_LIBRARY_PATH)");
}

template <typename F>
F symbol(void* so, const char* name) {
  void* f = dlsym(so, name);
  if (!f) throw std::runtime_error(std::string("dense bf16 floor: cuBLAS lacks ") + name);
  return reinterpret_cast<F>(f);
}

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
  l.handle_so = open_cublas();
  l.create = symbol<decltype(l.create)>(l.handle_so, "cublasCreate_v2");
  l.destroy = symbol<decltype(l.destroy)>(l.handle_so, "cublasDestroy_v2");
  l.set_stream = symbol<decltype(l.set_stream)>(l.handle_so, "cublasSetStream_v2");
  l.gemm = symbol<decltype(l.gemm)>(l.handle_so, "cublasGemmEx");
  if (l.create(&l.handle) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("dense bf16 floor: cublasCreate failed");
  if (l.set_stream(l.handle, stream) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("dense bf16 floor: cublasSetStream failed");
  l.a = random_bf16(m * k);
  l.b = random_bf16(k * n);
  DSV4H_HIP_CHECK(hipMalloc(&l.c, static_cast<size_t>(m * n) * 2));
}

DenseGemmFloor::~DenseGemmFloor() {
  Library& l = *library_;
  if (l.handle) l.destroy(l.handle);
  for (void* p : {l.a, l.b, l.c})
    if (p) (void)hipFree(p);
  // The library stays loaded: cuBLAS registers exit handlers.
}

void DenseGemmFloor::run() {
  Library& l = *library_;
  const float one = 1.f, zero = 0.f;
  // Column-major C^T[n, m] = B^T[n, k] A^T[k, m]: row-major C = A B.
  const cublasStatus_t status =
      l.gemm(l.handle, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(n_), static_cast<int>(m_), static_cast<int>(k_), &one,
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
