// The GPU forward's device data: see device_data.h.
#include "device_data.h"

#include <cstring>
#include <stdexcept>

#include "reference/narrow_float.h"

namespace dsv4h::model::gpu {

void fail(const std::string& what) { throw std::runtime_error("GPU forward: " + what); }

std::vector<uint16_t> to_bf16(const double* v, size_t n) {
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = reference::double_to_bf16(v[i]);
  return out;
}

size_t dtype_bytes(Dtype d) { return d == Dtype::bf16 ? 2 : 4; }

RowMatrix download(const DeviceView& v, hipStream_t stream) {
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream));
  RowMatrix m(v.rows, v.cols);
  if (v.rows == 0 || v.cols == 0) return m;
  std::vector<uint8_t> raw(static_cast<size_t>(v.rows * v.ld) * dtype_bytes(v.dtype));
  DSV4H_HIP_CHECK(hipMemcpy(raw.data(), v.p, raw.size(), hipMemcpyDeviceToHost));
  for (int64_t r = 0; r < v.rows; ++r)
    for (int64_t c = 0; c < v.cols; ++c) {
      const size_t i = static_cast<size_t>(r * v.ld + c);
      if (v.dtype == Dtype::bf16) {
        uint16_t b;
        std::memcpy(&b, raw.data() + 2 * i, 2);
        m(r, c) = reference::bf16_to_float(b);
      } else if (v.dtype == Dtype::f32) {
        float f;
        std::memcpy(&f, raw.data() + 4 * i, 4);
        m(r, c) = f;
      } else {
        int32_t k;
        std::memcpy(&k, raw.data() + 4 * i, 4);
        m(r, c) = k;
      }
    }
  return m;
}

void write_back(const RowMatrix& m, const DeviceView& v, hipStream_t stream) {
  DSV4H_HIP_CHECK(hipStreamSynchronize(stream));
  if (v.rows == 0 || v.cols == 0) return;
  std::vector<uint8_t> raw(static_cast<size_t>(v.rows * v.ld) * dtype_bytes(v.dtype));
  DSV4H_HIP_CHECK(hipMemcpy(raw.data(), v.p, raw.size(), hipMemcpyDeviceToHost));
  for (int64_t r = 0; r < v.rows; ++r)
    for (int64_t c = 0; c < v.cols; ++c) {
      const size_t i = static_cast<size_t>(r * v.ld + c);
      if (v.dtype == Dtype::bf16) {
        const uint16_t b = reference::double_to_bf16(m(r, c));
        std::memcpy(raw.data() + 2 * i, &b, 2);
      } else if (v.dtype == Dtype::f32) {
        const float f = static_cast<float>(m(r, c));
        std::memcpy(raw.data() + 4 * i, &f, 4);
      } else {
        const int32_t k = static_cast<int32_t>(m(r, c));
        std::memcpy(raw.data() + 4 * i, &k, 4);
      }
    }
  DSV4H_HIP_CHECK(hipMemcpy(v.p, raw.data(), raw.size(), hipMemcpyHostToDevice));
}

bool same_bits(const RowMatrix& a, const RowMatrix& b) {
  return a.rows() == b.rows() && a.cols() == b.cols() &&
         std::memcmp(a.data(), b.data(), sizeof(double) * static_cast<size_t>(a.size())) == 0;
}

}  // namespace dsv4h::model::gpu
