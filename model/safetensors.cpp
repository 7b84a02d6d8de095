#include "safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "harness/json_file.h"
#include "reference/errors.h"
#include "reference/narrow_float.h"

namespace dsv4h::model {
namespace {

using nlohmann::json;

constexpr int64_t kMaxNumel = int64_t{1} << 40;

StDtype dtype_from_name(const std::string& name, const std::string& where) {
  for (StDtype d : {StDtype::BF16, StDtype::F32, StDtype::F8_E4M3, StDtype::F8_E8M0, StDtype::I32, StDtype::I64})
    if (name == st_dtype_name(d)) return d;
  throw BadInput(where + ": dtype \"" + name + "\" is not one of BF16, F32, F8_E4M3, F8_E8M0, I32, I64");
}

int64_t read_offset(const json& value, const std::string& where) {
  if (!value.is_number_unsigned() || value.get<uint64_t>() > static_cast<uint64_t>(kMaxNumel) * 8)
    throw BadInput(where + ": data_offsets must be two non-negative integers within the file");
  return static_cast<int64_t>(value.get<uint64_t>());
}

StTensor read_entry(const std::string& name, const json& entry, const std::string& where, int64_t& begin,
                    int64_t& end) {
  const std::string at = where + ": tensor \"" + name + "\"";
  if (!entry.is_object()) throw BadInput(at + ": its header entry must be an object");
  for (const auto& [key, value] : entry.items())
    if (key != "dtype" && key != "shape" && key != "data_offsets") throw BadInput(at + ": unknown key \"" + key + "\"");
  if (!entry.contains("dtype") || !entry["dtype"].is_string()) throw BadInput(at + ": dtype missing or not a string");
  StTensor tensor;
  tensor.name = name;
  tensor.dtype = dtype_from_name(entry["dtype"].get<std::string>(), at);
  if (!entry.contains("shape") || !entry["shape"].is_array() || entry["shape"].size() > 8)
    throw BadInput(at + ": shape missing or not an array of at most 8 sizes");
  int64_t numel = 1;
  for (const json& size : entry["shape"]) {
    if (!size.is_number_unsigned() || size.get<uint64_t>() > static_cast<uint64_t>(kMaxNumel))
      throw BadInput(at + ": shape " + entry["shape"].dump() + " holds a size that is no non-negative integer");
    tensor.shape.push_back(size.get<int64_t>());
    numel = tensor.shape.back() == 0 ? 0 : numel * tensor.shape.back();
    if (numel > kMaxNumel) throw BadInput(at + ": shape " + entry["shape"].dump() + " is too large");
  }
  const json* offsets = entry.contains("data_offsets") ? &entry["data_offsets"] : nullptr;
  if (!offsets || !offsets->is_array() || offsets->size() != 2) throw BadInput(at + ": data_offsets must be [begin, end]");
  begin = read_offset((*offsets)[0], at);
  end = read_offset((*offsets)[1], at);
  if (end < begin) throw BadInput(at + ": data_offsets end before they begin");
  if (end - begin != numel * st_dtype_bytes(tensor.dtype))
    throw BadInput(at + ": data_offsets cover " + std::to_string(end - begin) + " bytes, its shape and dtype need " +
                   std::to_string(numel * st_dtype_bytes(tensor.dtype)));
  return tensor;
}

}  // namespace

double st_value(const StTensor& t, int64_t i) {
  using reference::bf16_to_float;
  using reference::fp8_e4m3_to_float;
  const uint8_t* b = t.bytes.data() + i * st_dtype_bytes(t.dtype);
  switch (t.dtype) {
    case StDtype::BF16: return bf16_to_float(static_cast<uint16_t>(b[0] | b[1] << 8));
    case StDtype::F32: {
      const uint32_t bits = b[0] | b[1] << 8 | b[2] << 16 | static_cast<uint32_t>(b[3]) << 24;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case StDtype::F8_E4M3: return fp8_e4m3_to_float(b[0]);
    case StDtype::F8_E8M0: return b[0] == 255 ? NAN : std::ldexp(1.0, b[0] - 127);
    case StDtype::I32: return static_cast<int32_t>(b[0] | b[1] << 8 | b[2] << 16 | static_cast<uint32_t>(b[3]) << 24);
    case StDtype::I64: {
      uint64_t bits = 0;
      for (int k = 7; k >= 0; --k) bits = bits << 8 | b[k];
      return static_cast<double>(static_cast<int64_t>(bits));
    }
  }
  return NAN;
}

const char* st_dtype_name(StDtype dtype) {
  switch (dtype) {
    case StDtype::BF16: return "BF16";
    case StDtype::F32: return "F32";
    case StDtype::F8_E4M3: return "F8_E4M3";
    case StDtype::F8_E8M0: return "F8_E8M0";
    case StDtype::I32: return "I32";
    case StDtype::I64: return "I64";
  }
  return "?";
}

int64_t st_dtype_bytes(StDtype dtype) {
  switch (dtype) {
    case StDtype::BF16: return 2;
    case StDtype::F32: case StDtype::I32: return 4;
    case StDtype::F8_E4M3: case StDtype::F8_E8M0: return 1;
    case StDtype::I64: return 8;
  }
  return 0;
}

int64_t StTensor::numel() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::vector<StTensor> parse_safetensors(const std::vector<uint8_t>& file, const std::string& where) {
  if (file.size() < 8) throw BadInput(where + ": shorter than the 8-byte header length (" + std::to_string(file.size()) + " bytes)");
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | file[i];
  if (header_bytes > kMaxSafetensorsHeaderBytes)
    throw BadInput(where + ": header length " + std::to_string(header_bytes) + " exceeds the " +
                   std::to_string(kMaxSafetensorsHeaderBytes) + "-byte limit");
  if (header_bytes > file.size() - 8)
    throw BadInput(where + ": truncated: the header needs " + std::to_string(header_bytes) + " bytes, the file holds " +
                   std::to_string(file.size() - 8) + " after the length");
  const std::string text(file.begin() + 8, file.begin() + 8 + static_cast<int64_t>(header_bytes));
  const json header = parse_json_text(text, where + " (header)");
  if (!header.is_object()) throw BadInput(where + ": the header must be a JSON object");
  const int64_t data_bytes = static_cast<int64_t>(file.size() - 8 - header_bytes);
  const uint8_t* data = file.data() + 8 + header_bytes;

  struct Placed { int64_t begin, end; size_t index; };
  std::vector<StTensor> tensors;
  std::vector<Placed> placed;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw BadInput(where + ": __metadata__ must be an object of strings");
      for (const auto& [key, value] : entry.items())
        if (!value.is_string()) throw BadInput(where + ": __metadata__ \"" + key + "\" must be a string");
      continue;
    }
    int64_t begin = 0, end = 0;
    tensors.push_back(read_entry(name, entry, where, begin, end));
    if (end > data_bytes)
      throw BadInput(where + ": tensor \"" + name + "\": truncated: its data ends at byte " + std::to_string(end) +
                     " of a " + std::to_string(data_bytes) + "-byte data section");
    tensors.back().bytes.assign(data + begin, data + end);
    placed.push_back({begin, end, tensors.size() - 1});
  }
  // The data section holds the tensors back to back: no overlap, no hole, nothing after the last.
  std::sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  int64_t expected = 0;
  for (const Placed& p : placed) {
    if (p.begin != expected)
      throw BadInput(where + ": tensor \"" + tensors[p.index].name + "\" starts at byte " + std::to_string(p.begin) +
                     " of the data section, " + (p.begin < expected ? "overlapping" : "leaving a hole after") +
                     " the tensor before it (which ends at " + std::to_string(expected) + ")");
    expected = p.end;
  }
  if (expected != data_bytes)
    throw BadInput(where + ": " + std::to_string(data_bytes - expected) + " bytes after the last tensor");
  return tensors;
}

std::vector<StTensor> read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BadInput(path + ": cannot open");
  const std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return parse_safetensors(file, path);
}

void write_safetensors(const std::string& path, const std::vector<StTensor>& tensors) {
  json header = json::object();
  int64_t offset = 0;
  for (const StTensor& t : tensors) {
    if (static_cast<int64_t>(t.bytes.size()) != t.numel() * st_dtype_bytes(t.dtype))
      throw std::logic_error("write_safetensors: tensor \"" + t.name + "\" holds the wrong number of bytes");
    header[t.name] = {{"dtype", st_dtype_name(t.dtype)}, {"shape", t.shape}, {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += static_cast<int64_t>(t.bytes.size());
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data starts 8-byte aligned, as the format recommends
  std::ofstream out(path, std::ios::binary);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(static_cast<uint64_t>(text.size()) >> (8 * i));
  out.write(reinterpret_cast<const char*>(length), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const StTensor& t : tensors) out.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
  out.close();
  if (out.fail()) throw std::runtime_error("cannot write " + path);
}

}  // namespace dsv4h::model
