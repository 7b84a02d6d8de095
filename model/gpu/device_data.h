// The GPU forward's device data (issue 31): zeroed device allocations with a typed view, and a
// device matrix read back to the host as an op's output (or written back where an observer changed
// it). The sizes of the pools and kernels the forward runs on are here too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "harness/gpu/device_tensor.h"
#include "model/forward.h"

namespace dsv4h::model::gpu {

constexpr int64_t kDims = 512;           // the latent (head_dim)
constexpr int64_t kIndexDims = 128;      // the indexer's head dim
constexpr int64_t kHeadBlock = 16;       // sparse attention's heads come in 16s
constexpr int64_t kSwaPageTokens = 256;  // spec 4.1
constexpr int64_t kC4PageEntries = 64;
constexpr int64_t kIndexerEntryBytes = 132;

// A runtime_error "GPU forward: <what>".
[[noreturn]] void fail(const std::string& what);

// The harness's device allocation (harness/gpu/device_tensor.h), zeroed, with a typed view: a
// pool's pages nobody wrote read as zeros (the indexer reads a partly filled page whole and
// discards the entries past the visible ones), not as uninitialised memory.
class DeviceBytes : public DeviceBuffer {
 public:
  DeviceBytes() = default;
  explicit DeviceBytes(size_t bytes) : DeviceBuffer(bytes) {
    if (bytes) DSV4H_HIP_CHECK(hipMemset(data(), 0, bytes));
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data());
  }
  // A view of `owner`'s memory, never freed by the view: a request's share of a batch's pools.
  static DeviceBytes view(const DeviceBytes& owner) {
    DeviceBytes v;
    static_cast<DeviceBuffer&>(v) = DeviceBuffer::view_of(owner);
    return v;
  }
};

template <typename T>
DeviceBytes upload(const std::vector<T>& values) {
  DeviceBytes d(values.size() * sizeof(T));
  if (!values.empty()) DSV4H_HIP_CHECK(hipMemcpy(d.as<void>(), values.data(), d.bytes(), hipMemcpyHostToDevice));
  return d;
}

template <typename T>
DeviceBytes device_array(int64_t n) {
  return DeviceBytes(static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(T));
}

std::vector<uint16_t> to_bf16(const double* v, size_t n);

// A device matrix of one dtype, rows with a leading dimension (elements), as an op's output.
enum class Dtype { bf16, f32, i32 };

struct DeviceView {
  void* p = nullptr;
  Dtype dtype = Dtype::bf16;
  int64_t rows = 0, cols = 0, ld = 0;
};

size_t dtype_bytes(Dtype d);
// The view's rows to the host as doubles, after the stream's work so far.
RowMatrix download(const DeviceView& v, hipStream_t stream);
// Writes m into v (rounded to v's dtype), leaving the padding between rows as it is.
void write_back(const RowMatrix& m, const DeviceView& v, hipStream_t stream);
bool same_bits(const RowMatrix& a, const RowMatrix& b);

}  // namespace dsv4h::model::gpu
