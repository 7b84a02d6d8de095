#include "json_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "errors.h"
#include "excerpt.h"

namespace dsv4h {

namespace {

// Where the text first nests deeper than kMaxJsonDepth, else npos; brackets inside strings do not
// count. One pass, before parsing: the parser would build the whole deep value first.
size_t too_deep_at(const std::string& text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::string::npos;
}

}  // namespace

nlohmann::json parse_json_text(const std::string& text, const std::string& where) {
  if (const size_t at = too_deep_at(text); at != std::string::npos)
    throw BadInput(where + ": arrays and objects nest deeper than " + std::to_string(kMaxJsonDepth) +
                   " levels (at byte " + std::to_string(at) + ")");
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number beyond double's range
    throw BadInput(where + ": not valid JSON: " + excerpt(e.what(), 200));
  }
}

nlohmann::json read_json_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw BadInput(path + ": a directory, not a JSON file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw BadInput(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_json_text(text.str(), path);
}

std::vector<std::string> json_files_in(const std::string& dir) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.is_regular_file() && entry.path().extension() == ".json") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

void write_json_file(const std::string& path, const nlohmann::json& document) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(path);
  out << document.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  out.close();  // a full disk shows only when the buffer is flushed
  if (out.fail()) throw std::runtime_error("cannot write " + path);
}

}  // namespace dsv4h
