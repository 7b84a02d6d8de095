#include "tensor_json.h"

#include <charconv>
#include <cmath>
#include <limits>

#include "compare.h"
#include "errors.h"
#include "excerpt.h"

namespace dsv4h {

namespace {

// The shortest text that reads back as the same double (as nlohmann's dump writes it).
void write_number(std::ostream& out, double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof(buf), v);
  out.write(buf, r.ptr - buf);
}

// An integer's text and its separator.
uint64_t integer_bytes(int64_t v) {
  uint64_t digits = 1;
  for (uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v); magnitude >= 10; magnitude /= 10)
    ++digits;
  return digits + (v < 0) + 1;
}

// The longest element of a dtype and its separator: a float "-1.1754943508222875e-38,".
uint64_t longest_element_bytes(DType dtype) {
  switch (dtype) {
    case DType::f32: case DType::bf16: case DType::fp8_e4m3: return 25;
    case DType::i32: return 12;
    case DType::i64: return 21;
    case DType::u8: return 4;
  }
  throw std::logic_error("unknown dtype");
}

}  // namespace

void write_tensor_json(std::ostream& out, const HostTensor& t, const std::string& indent) {
  out << "{\n" << indent << "  \"dtype\": \"" << dtype_name(t.dtype()) << "\",\n" << indent << "  \"shape\": "
      << shape_string(t.shape()) << ",\n" << indent << "  \"data\": [";
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (i) out << ',';
    if (t.dtype() == DType::i64) {
      out << t.data<int64_t>()[i];
    } else if (!dtype_is_float(t.dtype())) {
      out << static_cast<int64_t>(t.get(i));
    } else {
      const double v = t.get(i);
      if (std::isfinite(v)) write_number(out, v);
      else out << '"' << format_value(v) << '"';
    }
  }
  out << "]\n" << indent << "}";
}

void write_tensors_json(std::ostream& out, const TensorMap& tensors, const std::string& indent) {
  out << "{";
  const char* separator = "\n";
  for (const auto& [name, t] : tensors) {
    out << separator << indent << "  " << nlohmann::json(name).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
        << ": ";
    write_tensor_json(out, t, indent + "  ");
    separator = ",\n";
  }
  out << (tensors.empty() ? "}" : "\n" + indent + "}");
}

uint64_t tensors_json_bytes_bound(const TensorMap& tensors, bool values_final) {
  uint64_t bytes = 2;
  for (const auto& [name, t] : tensors) {
    bytes += 100 + name.size() + 24 * t.shape().size();
    // Integers counted exactly in one pass without allocating; floats at their longest, as
    // writing each to find its length would take as long as the dump.
    if (!values_final || dtype_is_float(t.dtype())) bytes += static_cast<uint64_t>(t.numel()) * longest_element_bytes(t.dtype());
    else if (t.dtype() == DType::i64) for (int64_t i = 0; i < t.numel(); ++i) bytes += integer_bytes(t.data<int64_t>()[i]);
    else for (int64_t i = 0; i < t.numel(); ++i) bytes += integer_bytes(static_cast<int64_t>(t.get(i)));
  }
  return bytes;
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
  throw BadInput(where + ": expected a number or \"nan\", \"inf\", \"-inf\", got " + describe_json(v));
}

int64_t integer_element(const nlohmann::json& v, DType dtype, const std::string& where) {
  if (!v.is_number_integer()) throw BadInput(where + ": expected an integer, got " + describe_json(v));
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX))
    throw BadInput(where + ": " + describe_json(v) + " does not fit " + dtype_name(dtype));
  const int64_t x = v.get<int64_t>();
  const bool fits = dtype == DType::i64 ||
                    (dtype == DType::i32 && x >= std::numeric_limits<int32_t>::min() &&
                     x <= std::numeric_limits<int32_t>::max()) ||
                    (dtype == DType::u8 && x >= 0 && x <= 255);
  if (!fits) throw BadInput(where + ": " + describe_json(v) + " does not fit " + dtype_name(dtype));
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
      throw BadInput(where + ".shape: expected non-negative integers, got " + describe_json(d));
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
    if (dtype_is_float(dtype)) {
      const double v = float_element(data[i], at);
      t.set(i, v);
      if (std::isfinite(v) && !std::isfinite(t.get(i)))
        throw BadInput(at + ": " + format_value(v) + " is beyond " + dtype_name(dtype) + "'s range (write \"inf\" or \"nan\" for those)");
    }
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
