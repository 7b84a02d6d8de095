# The GPU platform of a build. dsv4h_gpu_platform carries the vendor definition that
# kernels/portability.h switches on and the runtime library; everything GPU links it.
# dsv4h_mark_gpu_sources(files...) makes .hip files compile as GPU code (call it in the directory
# that adds them: source properties are per directory).
# DSV4H_KERNELS: what a tool or CPU-side test links for the GPU layer's kernel symbols.
if(DSV4H_GPU STREQUAL "none")
  set(DSV4H_KERNELS "")
  return()
endif()
set(DSV4H_KERNELS dsv4h_kernels)

add_library(dsv4h_gpu_platform INTERFACE)
if(DSV4H_GPU STREQUAL "cuda")
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 90a)
  endif()
  set(CMAKE_CUDA_STANDARD 17)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  target_compile_definitions(dsv4h_gpu_platform INTERFACE DSV4H_GPU_NVIDIA)
  target_link_libraries(dsv4h_gpu_platform INTERFACE CUDA::cudart_static)
  function(dsv4h_mark_gpu_sources)
    set_source_files_properties(${ARGN} PROPERTIES LANGUAGE CUDA)
  endfunction()
elseif(DSV4H_GPU STREQUAL "hip")
  # Debian's hipcc is the C++ compiler of this build (the hip preset sets it); .hip files get
  # compiled as HIP device code for the offload architecture.
  set(DSV4H_HIP_ARCH "gfx90a" CACHE STRING "AMD offload architecture")
  target_compile_definitions(dsv4h_gpu_platform INTERFACE DSV4H_GPU_AMD __HIP_PLATFORM_AMD__)
  target_link_libraries(dsv4h_gpu_platform INTERFACE amdhip64)
  function(dsv4h_mark_gpu_sources)
    set_source_files_properties(${ARGN} PROPERTIES LANGUAGE CXX
      COMPILE_OPTIONS "-xhip;--offload-arch=${DSV4H_HIP_ARCH}")
  endfunction()
else()
  message(FATAL_ERROR "DSV4H_GPU must be none, cuda or hip, got '${DSV4H_GPU}'")
endif()
