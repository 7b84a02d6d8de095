// The one file that knows which GPU vendor the build targets.
//
// Kernels and the harness's GPU layer are written against HIP names. On AMD (DSV4H_GPU_AMD) they
// are HIP itself; on NVIDIA (DSV4H_GPU_NVIDIA) each name below maps to the CUDA runtime. Debian's
// HIP-on-NVIDIA headers do not compile against CUDA 13, hence this thin header of our own.
// DSV4H_HIP_CHECK and DSV4H_LAUNCH_CHECK turn every failed runtime call or launch into an exception
// that names the call, the file and the line.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#if defined(DSV4H_GPU_AMD)
#include <hip/hip_runtime.h>
#elif defined(DSV4H_GPU_NVIDIA)
#include <cuda_runtime.h>

using hipError_t = cudaError_t;
using hipStream_t = cudaStream_t;
using hipEvent_t = cudaEvent_t;
using hipGraph_t = cudaGraph_t;
using hipGraphExec_t = cudaGraphExec_t;
using hipGraphNode_t = cudaGraphNode_t;
using hipGraphNodeType = cudaGraphNodeType;
using hipDeviceProp_t = cudaDeviceProp;

#define hipSuccess cudaSuccess
#define hipErrorNotReady cudaErrorNotReady
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipHostMallocMapped cudaHostAllocMapped
#define hipStreamCaptureModeGlobal cudaStreamCaptureModeGlobal

#define hipGetErrorName cudaGetErrorName
#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipSetDevice cudaSetDevice
#define hipGetDevice cudaGetDevice
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define hipFuncSetAttribute cudaFuncSetAttribute
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipHostMalloc cudaHostAlloc
#define hipHostGetDevicePointer cudaHostGetDevicePointer
#define hipHostFree cudaFreeHost
#define hipMemcpy cudaMemcpy
#define hipMemset cudaMemset
#define hipMemcpyAsync cudaMemcpyAsync
#define hipStreamCreate cudaStreamCreate
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamEndCapture cudaStreamEndCapture
#define hipGraphInstantiate(exec, graph, error_node, log, log_size) cudaGraphInstantiate(exec, graph, 0)
#define hipGraphLaunch cudaGraphLaunch
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipGraphDestroy cudaGraphDestroy
#define hipGraphGetNodes cudaGraphGetNodes
#define hipGraphNodeGetType cudaGraphNodeGetType
#define hipGraphNodeTypeKernel cudaGraphNodeTypeKernel
#define hipGraphClone cudaGraphClone
#define hipGraphNodeFindInClone cudaGraphNodeFindInClone
#define hipGraphDestroyNode cudaGraphDestroyNode
#define hipEventCreate cudaEventCreate
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventQuery cudaEventQuery
#define hipEventElapsedTime cudaEventElapsedTime
#else
#error "define DSV4H_GPU_AMD or DSV4H_GPU_NVIDIA (the CMake presets hip and cuda do)"
#endif

namespace dsv4h {

#if defined(__CUDACC__) || defined(__HIPCC__)
// Two floats rounded to nearest even into two bf16 (lo in the low half); NaN stays NaN.
__device__ __forceinline__ uint32_t pack_bf16x2_rn(float lo, float hi) {
#if defined(DSV4H_GPU_NVIDIA)
  uint32_t packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
#else
  auto round = [](float value) -> uint32_t {
    uint32_t u = __float_as_uint(value);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x0040u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  };
  return round(lo) | (round(hi) << 16);
#endif
}
#endif

#if defined(__CUDACC__) || defined(__HIPCC__)
// A load (16, 8 or 4 bytes) of data no kernel writes while this one runs (the read-only path on
// NVIDIA), and a 16-byte store of data this kernel will not read again (evict-first on NVIDIA). On
// AMD both are plain accesses: the nontemporal builtins take native vector types, and no AMD GPU here could
// measure whether they pay.
template <typename Vector>  // uint4, uint2 or a 4-byte scalar
__device__ __forceinline__ Vector load_read_only(const Vector* p) {
#if defined(DSV4H_GPU_NVIDIA)
  return __ldg(p);
#else
  return *p;
#endif
}
// load_read_only with PTX's L2 prefetch size of 64 bytes (.L2::64B) rather than the default: on the
// H200 faster for gathers of 64-byte pieces at random places (kv_pool_gather.hip). Plain on AMD.
#if defined(DSV4H_GPU_NVIDIA)
__device__ __forceinline__ uint4 load_read_only_l2_64b(const uint4* p) {
  uint4 v;
  asm volatile("ld.global.nc.L2::64B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
__device__ __forceinline__ uint2 load_read_only_l2_64b(const uint2* p) {
  uint2 v;
  asm volatile("ld.global.nc.L2::64B.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ uint8_t load_read_only_l2_64b(const uint8_t* p) {
  uint32_t v;
  asm volatile("ld.global.nc.L2::64B.u8 %0, [%1];" : "=r"(v) : "l"(p));
  return static_cast<uint8_t>(v);
}
#else
template <typename T>  // uint4, uint2 or uint8_t
__device__ __forceinline__ T load_read_only_l2_64b(const T* p) {
  return *p;
}
#endif
__device__ __forceinline__ void store_evict_first(uint4* p, uint4 v) {
#if defined(DSV4H_GPU_NVIDIA)
  __stcs(p, v);
#else
  *p = v;
#endif
}
#endif

#if defined(__CUDACC__) || defined(__HIPCC__)
// A load of host memory that the host writes while the kernel runs: system scope, acquire, the
// memory model's way to see another agent's write (a volatile load promises less).
__device__ __forceinline__ int load_acquire_system(const int* p) {
#if defined(DSV4H_GPU_NVIDIA)
  int value;
  asm volatile("ld.acquire.sys.global.b32 %0, [%1];" : "=r"(value) : "l"(p) : "memory");
  return value;
#else
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
#endif
}
#endif

#if defined(__CUDACC__) || defined(__HIPCC__)
// The largest `value` over each aligned group of `width` lanes (a power of two up to 32), in every
// lane of the group. Every lane of the warp must call it (no lane branched away).
__device__ __forceinline__ float max_over_lanes(float value, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) {
#if defined(DSV4H_GPU_NVIDIA)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset, width));
#else
    value = fmaxf(value, __shfl_xor(value, offset, width));
#endif
  }
  return value;
}

// The sum of `value` over each aligned group of `width` lanes (a power of two up to 32), in every
// lane of the group, as a butterfly: the same order on every run. Every lane of the warp must call it.
__device__ __forceinline__ float sum_over_lanes(float value, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) {
#if defined(DSV4H_GPU_NVIDIA)
    value += __shfl_xor_sync(0xffffffffu, value, offset, width);
#else
    value += __shfl_xor(value, offset, width);
#endif
  }
  return value;
}
#endif

#if defined(__CUDACC__) || defined(__HIPCC__)
// Schedule perturbation (issue 27). A missing barrier passes the tests and racecheck alike when a
// card runs a block's warps in the same lucky order every time. With DSV4H_PERTURB_SCHEDULE (the
// *_perturb kernel libraries) each warp sleeps 0-4 us at a kernel's schedule_point() and before and
// after every sync_block(), so that warps overtake each other. The delay hashes the block, the warp
// and the SM clock read at the call: no seed to set, every launch and every run differs (a fixed
// pattern would not replay a failure anyway, as the card's own interleaving does not repeat; a
// failing case is rerun under the perturbed binary). Without the definition: nothing, and a barrier.
#if defined(DSV4H_PERTURB_SCHEDULE)
__device__ __forceinline__ uint32_t perturb_hash(uint32_t x) {  // a 32-bit integer mix (lowbias32)
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  return x ^ (x >> 16);
}

__device__ __forceinline__ void perturb_sleep() {
  const uint32_t block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const uint32_t warp = (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) / warpSize;
  const uint32_t delay_ns =
      perturb_hash(static_cast<uint32_t>(clock64()) ^ perturb_hash(block * 64u + warp)) & 4095u;
#if defined(DSV4H_GPU_NVIDIA)
  __nanosleep(delay_ns);
#else
  // s_sleep takes a constant: each s_sleep 1 waits 64 clocks, about 40 ns on gfx90a.
  for (uint32_t slept = 0; slept < delay_ns; slept += 40) __builtin_amdgcn_s_sleep(1);
#endif
}
#endif

// A kernel's first statement, where its warps may start out of order.
__device__ __forceinline__ void schedule_point() {
#if defined(DSV4H_PERTURB_SCHEDULE)
  perturb_sleep();
#endif
}

// __syncthreads(), the only barrier the kernels use.
__device__ __forceinline__ void sync_block() {
#if defined(DSV4H_PERTURB_SCHEDULE)
  perturb_sleep();
  __syncthreads();
  perturb_sleep();
#else
  __syncthreads();
#endif
}
#endif

#if defined(DSV4H_GPU_AMD)
inline constexpr const char* kGpuVendor = "amd";
#else
inline constexpr const char* kGpuVendor = "nvidia";
#endif

class GpuError : public std::runtime_error {
 public:
  GpuError(hipError_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  hipError_t code() const { return code_; }

 private:
  hipError_t code_;
};

[[noreturn]] inline void throw_gpu_error(hipError_t code, const char* call, const char* file,
                                         int line) {
  throw GpuError(code, std::string(call) + " failed at " + file + ":" + std::to_string(line) +
                           ": " + hipGetErrorName(code) + " (" + hipGetErrorString(code) + ")");
}

}  // namespace dsv4h

#define DSV4H_HIP_CHECK(call)                                              \
  do {                                                                     \
    hipError_t dsv4h_status_ = (call);                                     \
    if (dsv4h_status_ != hipSuccess)                                       \
      ::dsv4h::throw_gpu_error(dsv4h_status_, #call, __FILE__, __LINE__);  \
  } while (0)

// After a kernel launch: a bad configuration shows up here, not at the launch expression.
#define DSV4H_LAUNCH_CHECK(kernel_name)                                                  \
  do {                                                                                   \
    hipError_t dsv4h_status_ = hipGetLastError();                                        \
    if (dsv4h_status_ != hipSuccess)                                                     \
      ::dsv4h::throw_gpu_error(dsv4h_status_, "launch of " kernel_name, __FILE__, __LINE__); \
  } while (0)
