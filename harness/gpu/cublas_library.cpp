#include "cublas_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace dsv4h {
namespace {

void* open_cublas(std::string& tried) {
  std::vector<std::string> names;
  if (const char* path = std::getenv("DSV4H_CUBLAS")) names.emplace_back(path);
  // The version the build compiled against first; then any.
  names.insert(names.end(), {"libcublas.so." + std::to_string(CUBLAS_VER_MAJOR), "libcublas.so"});
  for (const std::string& name : names) {
    if (void* so = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) return so;
    tried += (tried.empty() ? "" : ", ") + name;
  }
  return nullptr;
}

template <typename F>
void bind(void* so, const char* name, F& f) {
  f = reinterpret_cast<F>(dlsym(so, name));
  if (!f) throw std::runtime_error(std::string("the loaded cuBLAS lacks ") + name);
}

}  // namespace

const CublasLibrary& CublasLibrary::get(const char* user) {
  static std::once_flag once;
  static CublasLibrary library;
  static std::string error;
  std::call_once(once, [] {
    std::string tried;
    void* so = open_cublas(tried);
    if (!so) {
      error = "no cuBLAS found (tried " + tried + "): set DSV4H_CUBLAS to libcublas.so's path, or LD_LIBRARY_PATH";
      return;
    }
    try {
      bind(so, "cublasCreate_v2", library.create);
      bind(so, "cublasDestroy_v2", library.destroy);
      bind(so, "cublasSetStream_v2", library.set_stream);
      bind(so, "cublasSetMathMode", library.set_math_mode);
      bind(so, "cublasSetWorkspace_v2", library.set_workspace);
      bind(so, "cublasGemmEx", library.gemm);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  if (!error.empty()) throw std::runtime_error(std::string(user) + ": " + error);
  return library;
}

}  // namespace dsv4h
