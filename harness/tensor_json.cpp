#include "tensor_json.h"

#include <cmath>
#include <limits>

#include "compare.h"
#include "errors.h"

namespace dsv4h {

nlohmann::json tensor_to_json(const HostTensor& t) {
  nlohmann::json data = nlohmann::json::array();
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (!dtype_is_float(t.dtype())) {
      if (t.dtype() == DType::i64) data.push_back(t.data<int64_t>()[i]);
      else data.push_back(static_cast<int64_t>(t.get(i)));
      continue;
    }
    const double v = t.get(i);
    if (std::isfinite(v)) data.push_back(v);
    else data.push_back(format_value(v));
  }
  return {{"dtype", dtype_name(t.dtype())}, {"shape", t.shape()}, {"data", std::move(data)}};
}

nlohmann::json tensors_to_json(const TensorMap& tensors) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [name, t] : tensors) j[name] = tensor_to_json(t);
  return j;
}

namespace {

double float_element(const nlohmann::json& v, const std::string& where) {
  if (v.is_number()) return v.get<double>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "nan") return NAN;
    if (s == "inf") return INFINITY;
    if (s == "-inf") return -INFINITY;
  }
  throw BadInput(where + ": expected a number or \"nan\", \"inf\", \"-inf\", got " + v.dump());
}

int64_t integer_element(const nlohmann::json& v, DType dtype, const std::string& where) {
  if (!v.is_number_integer()) throw BadInput(where + ": expected an integer, got " + v.dump());
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    throw BadInput(where + ": " + v.dump() + " does not fit " + dtype_name(dtype));
  const int64_t x = v.get<int64_t>();
  const bool fits = dtype == DType::i64 ||
                    (dtype == DType::i32 && x >= std::numeric_limits<int32_t>::min() &&
                     x <= std::numeric_limits<int32_t>::max()) ||
                    (dtype == DType::u8 && x >= 0 && x <= 255);
  if (!fits) throw BadInput(where + ": " + v.dump() + " does not fit " + dtype_name(dtype));
  return x;
}

}  // namespace

HostTensor tensor_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw BadInput(where + ": expected an object with dtype, shape and data");
  for (const char* key : {"dtype", "shape", "data"})
    if (!j.contains(key)) throw BadInput(where + ": missing field \"" + key + "\"");
  if (!j["dtype"].is_string()) throw BadInput(where + ".dtype: expected a string");
  DType dtype;
  try {
    dtype = dtype_from_name(j["dtype"].get<std::string>());
  } catch (const std::invalid_argument& e) {
    throw BadInput(where + ".dtype: " + e.what());
  }
  const nlohmann::json& shape_json = j["shape"];
  if (!shape_json.is_array()) throw BadInput(where + ".shape: expected an array of non-negative integers");
  Shape shape;
  for (const auto& d : shape_json) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0)
      throw BadInput(where + ".shape: expected non-negative integers, got " + d.dump());
    shape.push_back(d.get<int64_t>());
  }
  const nlohmann::json& data = j["data"];
  if (!data.is_array()) throw BadInput(where + ".data: expected an array");
  int64_t numel = 0;
  try {
    numel = shape_numel(shape);
  } catch (const std::invalid_argument& e) {
    throw BadInput(where + ".shape: " + e.what());
  }
  if (static_cast<int64_t>(data.size()) != numel)
    throw BadInput(where + ".data: " + std::to_string(data.size()) + " elements, shape " + shape_string(shape) +
                   " needs " + std::to_string(numel));
  HostTensor t(dtype, shape);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const std::string at = where + ".data[" + std::to_string(i) + "]";
    if (dtype_is_float(dtype)) t.set(i, float_element(data[i], at));
    else if (dtype == DType::i64) t.data<int64_t>()[i] = integer_element(data[i], dtype, at);
    else t.set(i, static_cast<double>(integer_element(data[i], dtype, at)));
  }
  return t;
}

TensorMap tensors_from_json(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw BadInput(where + ": expected an object of named tensors");
  TensorMap tensors;
  for (const auto& [name, value] : j.items()) tensors[name] = tensor_from_json(value, where + "." + name);
  return tensors;
}

}  // namespace dsv4h
