#include "json_file.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "errors.h"

namespace dsv4h {

nlohmann::json read_json_file(const std::string& path) {
  if (std::filesystem::is_directory(path)) throw BadInput(path + ": a directory, not a JSON file");
  std::ifstream in(path);
  if (!in) throw BadInput(path + ": cannot open");
  try {
    return nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number beyond double's range
    throw BadInput(path + ": not valid JSON: " + e.what());
  }
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
  out << document.dump(1) << "\n";
  out.close();  // a full disk shows only when the buffer is flushed
  if (out.fail()) throw std::runtime_error("cannot write " + path);
}

}  // namespace dsv4h
