// Host tensors: a dtype, a row-major shape and the raw bytes, so that what the GPU wrote (including
// NaN payloads used as poison) is kept bit for bit.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "dtype.h"

namespace dsv4h {

using Shape = std::vector<int64_t>;

std::string shape_string(const Shape& shape);
int64_t shape_numel(const Shape& shape);

class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, Shape shape);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return numel_; }
  size_t nbytes() const { return bytes_.size(); }
  uint8_t* bytes() { return bytes_.data(); }
  const uint8_t* bytes() const { return bytes_.data(); }

  // Typed view; T must have the dtype's size (uint16_t for bf16, uint8_t for fp8 and u8).
  template <typename T>
  T* data() {
    check_element_size(sizeof(T));
    return reinterpret_cast<T*>(bytes_.data());
  }
  template <typename T>
  const T* data() const {
    check_element_size(sizeof(T));
    return reinterpret_cast<const T*>(bytes_.data());
  }

  // Element i as the value it encodes (integers exactly up to 2^53), and stored with the dtype's
  // rounding (floats) or truncation towards zero (integers).
  double get(int64_t i) const;
  void set(int64_t i, double value);
  // Raw bit pattern of element i, zero-extended: what "unwritten" and "bitwise equal" compare.
  uint64_t bits(int64_t i) const;
  void set_bits(int64_t i, uint64_t bits);

  // Rows [begin, end) of the first dimension, as a new tensor.
  HostTensor rows(int64_t begin, int64_t end) const;
  // Row-major multi-index of a flat index, e.g. "[3, 17]".
  std::string index_string(int64_t flat) const;

 private:
  void check_element_size(size_t size) const;

  DType dtype_ = DType::f32;
  Shape shape_;
  int64_t numel_ = 0;
  std::vector<uint8_t> bytes_;
};

// Named tensors of one case: a component's inputs, or one backend's outputs.
using TensorMap = std::map<std::string, HostTensor>;

}  // namespace dsv4h
