#include "args.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace dsv4h::cli {

Args::Args(const std::vector<std::string>& argv, const std::set<std::string>& valued,
           const std::set<std::string>& flags) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    // Which of two values was meant is not for us to guess.
    if (values_.count(a)) throw UsageError(a + " given twice");
    if (flags.count(a)) {
      values_[a] = "";
    } else if (valued.count(a)) {
      if (i + 1 >= argv.size()) throw UsageError(a + " needs a value");
      values_[a] = argv[++i];
    } else {
      throw UsageError("unknown argument \"" + a + "\" (see --help)");
    }
  }
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

long long Args::integer(const std::string& name, long long fallback, long long min_value) const {
  if (!has(name)) return fallback;
  const std::string& s = values_.at(name);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno == ERANGE || v < min_value)
    throw UsageError(name + " must be an integer >= " + std::to_string(min_value) + ", got \"" + s + "\"");
  return v;
}

void check_writable(const std::string& option, const std::string& path) {
  namespace fs = std::filesystem;
  const auto refuse = [&](const std::string& why) {
    return UsageError(option + " " + path + ": cannot write there (" + why + ")");
  };
  if (path.empty()) throw refuse("an empty path");
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  if (fs::exists(status)) {
    if (fs::is_directory(status)) throw refuse("a directory");
    if (::access(path.c_str(), W_OK) != 0) throw refuse(std::strerror(errno));
    return;
  }
  // The nearest folder that exists must be one we can create entries in.
  fs::path folder = fs::path(path).parent_path();
  while (!folder.empty() && !fs::exists(folder, error)) folder = folder.parent_path();
  if (folder.empty()) folder = ".";
  if (!fs::is_directory(folder, error)) throw refuse(folder.string() + " is not a directory");
  if (::access(folder.c_str(), W_OK | X_OK) != 0) throw refuse(folder.string() + ": " + std::strerror(errno));
}

}  // namespace dsv4h::cli
