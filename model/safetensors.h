// safetensors files: an 8-byte little-endian header length N, N bytes of JSON header
// ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}), then the raw
// little-endian tensors, back to back. Read with every size and offset checked against the file: a
// malformed, truncated or inconsistent file is BadInput naming the file and the tensor, never a
// crash or a read past the end.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dsv4h::model {

enum class StDtype { BF16, F32, F8_E4M3, F8_E8M0, I32, I64 };

const char* st_dtype_name(StDtype dtype);
int64_t st_dtype_bytes(StDtype dtype);

struct StTensor {
  std::string name;
  StDtype dtype = StDtype::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // numel * st_dtype_bytes(dtype), little endian
  int64_t numel() const;
};

// Element i of a tensor as a double: BF16, F32 and F8_E4M3 by value, F8_E8M0 as 2^(byte - 127)
// (255 is NaN), integers exactly up to 2^53.
double st_value(const StTensor& tensor, int64_t i);

// The largest header read: the real DeepSeek-V4 checkpoint shards' headers are a few hundred KiB.
constexpr uint64_t kMaxSafetensorsHeaderBytes = uint64_t{64} << 20;

std::vector<StTensor> read_safetensors(const std::string& path);
// The same for a file's bytes in memory; `where` names it in messages.
std::vector<StTensor> parse_safetensors(const std::vector<uint8_t>& file, const std::string& where);
// Tensors in the given order; a failed write (a full disk) is a runtime_error.
void write_safetensors(const std::string& path, const std::vector<StTensor>& tensors);

}  // namespace dsv4h::model
