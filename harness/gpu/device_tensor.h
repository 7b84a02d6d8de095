// Device memory for the harness: RAII buffers, tensors with dtype and shape, copies both ways.
// Allocation is refused while a graph capture is open on this thread (see capture_scope.h), so a
// hidden allocation in a captured launch sequence fails by name instead of breaking the graph.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "../../kernels/portability.h"
#include "../tensor.h"

namespace dsv4h {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  // A view of memory another buffer owns: never freed, never allocated (so it may be made while a
  // graph is being captured).
  static DeviceBuffer view_of(const DeviceBuffer& owner);

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool owned_ = true;
};

struct DeviceTensor {
  DType dtype = DType::f32;
  Shape shape;
  DeviceBuffer buffer;

  static DeviceTensor like(const HostTensor& host);  // same dtype and shape, contents undefined
  void upload(const HostTensor& host);                // shapes must match
  HostTensor download() const;
};

class DeviceTensorMap {
 public:
  static DeviceTensorMap upload(const TensorMap& host);
  static DeviceTensorMap like(const TensorMap& host);
  void upload_into(const TensorMap& host);  // same names, dtypes and shapes as at creation
  TensorMap download() const;

  template <typename T>
  T* data(const std::string& name) const { return static_cast<T*>(at(name).buffer.data()); }
  const DeviceTensor& at(const std::string& name) const;
  std::vector<std::string> names() const;
  // Adds `name` as a view of `tensor` (no copy): a composed step hands an earlier stage's output
  // buffer to a later stage as its input. `tensor` must outlive this map.
  void alias(const std::string& name, const DeviceTensor& tensor);

 private:
  std::map<std::string, DeviceTensor> tensors_;
};

// While alive, this thread is capturing a graph: DeviceBuffer allocation throws naming `what`.
class CaptureScope {
 public:
  explicit CaptureScope(std::string what);
  ~CaptureScope();
  CaptureScope(const CaptureScope&) = delete;
  CaptureScope& operator=(const CaptureScope&) = delete;
};

}  // namespace dsv4h
