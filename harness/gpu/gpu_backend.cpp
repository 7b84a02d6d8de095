// The GPU backend of a cuda or hip build: one device (the one CTest allocated, harness/gpu_slot.h), one stream.
#include "../gpu_backend.h"

#include "../errors.h"
#include "../gpu_slot.h"
#include "graph_replay.h"

namespace dsv4h {
namespace {

class DeviceBackend : public GpuBackend {
 public:
  explicit DeviceBackend(int device) {
    DSV4H_HIP_CHECK(hipSetDevice(device));
    hipDeviceProp_t props;
    DSV4H_HIP_CHECK(hipGetDeviceProperties(&props, device));
    name_ = std::string(props.name) + " (" + kGpuVendor + ", device " + std::to_string(device) + ")";
    // A blocking stream: it is ordered after the synchronous uploads on the default stream.
    DSV4H_HIP_CHECK(hipStreamCreate(&stream_));
  }
  ~DeviceBackend() override { (void)hipStreamDestroy(stream_); }

  std::string device_name() const override { return name_; }

  TensorMap run(const Component& component, const Case& c, const TensorMap& inputs, Poison poison) override {
    TensorMap outputs = checked_outputs(component, c, inputs);
    fill_poison(outputs, poison);
    return run_over(component, c, inputs, outputs);
  }

  TensorMap run_over(const Component& component, const Case& c, const TensorMap& inputs,
                     const TensorMap& outputs) override {
    if (!component.gpu) throw std::runtime_error(component.name + " has no GPU kernel in this build");
    const DeviceTensorMap device_inputs = DeviceTensorMap::upload(inputs);
    DeviceTensorMap device_outputs = DeviceTensorMap::upload(outputs);
    component.gpu(c, device_inputs, device_outputs, stream_);
    DSV4H_HIP_CHECK(hipStreamSynchronize(stream_));
    return device_outputs.download();
  }

  ReplayResult graph_replay(const Component& component, const Case& base, const ReplayOptions& options) override {
    return run_graph_replay(*this, stream_, component, base, options);
  }

 private:
  std::string name_;
  hipStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<GpuBackend> open_gpu_backend(std::string& why_not) {
  int count = 0;
  const hipError_t status = hipGetDeviceCount(&count);
  if (status != hipSuccess) {
    why_not = std::string("no GPU found: hipGetDeviceCount: ") + hipGetErrorName(status) + " (" +
              hipGetErrorString(status) + ")";
    (void)hipGetLastError();
    return nullptr;
  }
  if (count == 0) {
    why_not = "no GPU found: hipGetDeviceCount reports 0 devices";
    return nullptr;
  }
  int device = 0;
  try {
    device = assigned_gpu();
  } catch (const BadInput& e) {
    why_not = e.what();
    return nullptr;
  }
  if (device >= count) {
    why_not = "CTEST_RESOURCE_GROUP_0_GPUS assigns device " + std::to_string(device) + ", but " +
              std::to_string(count) + " are visible (is the resource spec from another machine?)";
    return nullptr;
  }
  return std::make_unique<DeviceBackend>(device);
}

}  // namespace dsv4h
