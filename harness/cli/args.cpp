#include "args.h"

#include <cerrno>
#include <cstdlib>

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

}  // namespace dsv4h::cli
