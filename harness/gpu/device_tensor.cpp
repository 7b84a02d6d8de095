#include "device_tensor.h"

#include <stdexcept>

namespace dsv4h {
namespace {
thread_local bool capturing = false;
thread_local std::string capture_what;
}  // namespace

CaptureScope::CaptureScope(std::string what) {
  capturing = true;
  capture_what = std::move(what);
}
CaptureScope::~CaptureScope() { capturing = false; }

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (capturing)
    throw std::runtime_error("hipMalloc of " + std::to_string(bytes) + " bytes during graph capture of " +
                             capture_what + ": allocate before capture");
  if (bytes) DSV4H_HIP_CHECK(hipMalloc(&data_, bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (data_ && owned_) (void)hipFree(data_);  // a destructor must not throw; a failed free leaks only
}

DeviceBuffer DeviceBuffer::view_of(const DeviceBuffer& owner) {
  DeviceBuffer view;
  view.data_ = owner.data_;
  view.bytes_ = owner.bytes_;
  view.owned_ = false;
  return view;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(other.data_), bytes_(other.bytes_), owned_(other.owned_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ && owned_) (void)hipFree(data_);
    data_ = other.data_;
    bytes_ = other.bytes_;
    owned_ = other.owned_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

DeviceTensor DeviceTensor::like(const HostTensor& host) {
  return DeviceTensor{host.dtype(), host.shape(), DeviceBuffer(host.nbytes())};
}

void DeviceTensor::upload(const HostTensor& host) {
  if (host.dtype() != dtype || host.shape() != shape)
    throw std::logic_error("upload of " + dtype_name(host.dtype()) + shape_string(host.shape()) + " into " +
                           dtype_name(dtype) + shape_string(shape));
  if (host.nbytes()) DSV4H_HIP_CHECK(hipMemcpy(buffer.data(), host.bytes(), host.nbytes(), hipMemcpyHostToDevice));
}

HostTensor DeviceTensor::download() const {
  HostTensor host(dtype, shape);
  if (host.nbytes()) DSV4H_HIP_CHECK(hipMemcpy(host.bytes(), buffer.data(), host.nbytes(), hipMemcpyDeviceToHost));
  return host;
}

DeviceTensorMap DeviceTensorMap::like(const TensorMap& host) {
  DeviceTensorMap map;
  for (const auto& [name, t] : host) map.tensors_.emplace(name, DeviceTensor::like(t));
  return map;
}

DeviceTensorMap DeviceTensorMap::upload(const TensorMap& host) {
  DeviceTensorMap map = like(host);
  map.upload_into(host);
  return map;
}

void DeviceTensorMap::upload_into(const TensorMap& host) {
  for (const auto& [name, t] : host) {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) throw std::logic_error("upload of unknown tensor \"" + name + "\"");
    it->second.upload(t);
  }
}

TensorMap DeviceTensorMap::download() const {
  TensorMap host;
  for (const auto& [name, t] : tensors_) host[name] = t.download();
  return host;
}

std::vector<std::string> DeviceTensorMap::names() const {
  std::vector<std::string> names;
  for (const auto& [name, t] : tensors_) names.push_back(name);
  return names;
}

void DeviceTensorMap::alias(const std::string& name, const DeviceTensor& tensor) {
  DeviceTensor view{tensor.dtype, tensor.shape, DeviceBuffer::view_of(tensor.buffer)};
  if (!tensors_.emplace(name, std::move(view)).second) throw std::logic_error("device tensor \"" + name + "\" given twice");
}

const DeviceTensor& DeviceTensorMap::at(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw std::logic_error("no device tensor \"" + name + "\"");
  return it->second;
}

}  // namespace dsv4h
