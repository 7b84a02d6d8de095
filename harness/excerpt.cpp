#include "excerpt.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace dsv4h {
namespace {

// The length of the well-formed UTF-8 character at text[i] (RFC 3629: no overlongs, no
// surrogates, nothing above U+10FFFF), or 0 where none starts there.
size_t utf8_char_length(const std::string& text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char b = byte(i);
  if (b < 0x80) return 1;
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xbf;  // the second byte's range
  if (b >= 0xc2 && b <= 0xdf) n = 2;
  else if (b == 0xe0) n = 3, lo = 0xa0;
  else if (b == 0xed) n = 3, hi = 0x9f;
  else if (b >= 0xe1 && b <= 0xef) n = 3;
  else if (b == 0xf0) n = 4, lo = 0x90;
  else if (b >= 0xf1 && b <= 0xf3) n = 4;
  else if (b == 0xf4) n = 4, hi = 0x8f;
  else return 0;
  if (i + n > text.size()) return 0;
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  return n;
}

}  // namespace

std::string excerpt(const std::string& text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = 0;
  while (end < max_bytes) {
    const size_t n = std::max<size_t>(utf8_char_length(text, end), 1);
    if (end + n > max_bytes) break;
    end += n;
  }
  return text.substr(0, end) + "... (" + std::to_string(text.size()) + " bytes)";
}

std::string describe_json(const nlohmann::json& value) {
  if (value.is_array()) return "an array of " + std::to_string(value.size()) + " elements";
  if (value.is_object()) return "an object of " + std::to_string(value.size()) + " fields";
  if (value.is_string()) return "\"" + excerpt(value.get<std::string>(), 40) + "\"";
  return value.dump();
}

}  // namespace dsv4h
