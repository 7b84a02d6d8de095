#include "tensor.h"

#include <cmath>

namespace dsv4h {

std::string shape_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw std::invalid_argument("negative dimension in shape " + shape_string(shape));
    if (d > 0 && n > (int64_t{1} << 40) / d)
      throw std::invalid_argument("shape " + shape_string(shape) + " has more than 2^40 elements");
    n *= d;
  }
  return n;
}

HostTensor::HostTensor(DType dtype, Shape shape)
    : dtype_(dtype), shape_(std::move(shape)), numel_(shape_numel(shape_)),
      bytes_(static_cast<size_t>(numel_) * dtype_size(dtype)) {}

void HostTensor::check_element_size(size_t size) const {
  if (size != dtype_size(dtype_))
    throw std::logic_error("typed access of size " + std::to_string(size) + " to a " +
                           dtype_name(dtype_) + " tensor");
}

uint64_t HostTensor::bits(int64_t i) const {
  uint64_t value = 0;
  std::memcpy(&value, bytes_.data() + i * dtype_size(dtype_), dtype_size(dtype_));
  return value;
}

void HostTensor::set_bits(int64_t i, uint64_t value) {
  std::memcpy(bytes_.data() + i * dtype_size(dtype_), &value, dtype_size(dtype_));
}

double HostTensor::get(int64_t i) const {
  switch (dtype_) {
    case DType::f32: return data<float>()[i];
    case DType::bf16: return bf16_to_float(data<uint16_t>()[i]);
    case DType::fp8_e4m3: return fp8_e4m3_to_float(data<uint8_t>()[i]);
    case DType::i32: return data<int32_t>()[i];
    case DType::i64: return static_cast<double>(data<int64_t>()[i]);
    case DType::u8: return data<uint8_t>()[i];
  }
  throw std::logic_error("unknown dtype");
}

void HostTensor::set(int64_t i, double value) {
  switch (dtype_) {
    case DType::f32: data<float>()[i] = static_cast<float>(value); return;
    case DType::bf16: data<uint16_t>()[i] = double_to_bf16(value); return;
    case DType::fp8_e4m3: data<uint8_t>()[i] = double_to_fp8_e4m3(value); return;
    case DType::i32: data<int32_t>()[i] = static_cast<int32_t>(value); return;
    case DType::i64: data<int64_t>()[i] = static_cast<int64_t>(value); return;
    case DType::u8: data<uint8_t>()[i] = static_cast<uint8_t>(value); return;
  }
}

HostTensor HostTensor::rows(int64_t begin, int64_t end) const {
  if (shape_.empty() || begin < 0 || end < begin || end > shape_[0])
    throw std::out_of_range("rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                            ") of a tensor of shape " + shape_string(shape_));
  Shape sub = shape_;
  sub[0] = end - begin;
  HostTensor out(dtype_, sub);
  const size_t row_bytes = shape_[0] ? nbytes() / static_cast<size_t>(shape_[0]) : 0;
  std::memcpy(out.bytes(), bytes() + begin * row_bytes, out.nbytes());
  return out;
}

std::string HostTensor::index_string(int64_t flat) const {
  std::vector<int64_t> index(shape_.size());
  for (size_t d = shape_.size(); d-- > 0;) {
    index[d] = shape_[d] ? flat % shape_[d] : 0;
    flat = shape_[d] ? flat / shape_[d] : 0;
  }
  return shape_string(index);
}

}  // namespace dsv4h
