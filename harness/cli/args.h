// Command-line parsing for dsv4h: `dsv4h COMMAND [--option value | --flag]...`.
#pragma once

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace dsv4h::cli {

// Exit codes of every command.
constexpr int kPass = 0, kMismatch = 1, kBadUsage = 2;

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Args {
 public:
  // `valued` options take a value, `flags` do not; anything else is a UsageError naming it.
  Args(const std::vector<std::string>& argv, const std::set<std::string>& valued, const std::set<std::string>& flags);
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  long long integer(const std::string& name, long long fallback, long long min_value) const;

 private:
  std::map<std::string, std::string> values_;
};

// Before a run, so that hours of work are not lost at its end: `path` (the value of `option`, e.g.
// --json) can be written, i.e. is a writable file (or device) or can be created, with the folders
// above it, under a writable folder. A UsageError naming the option and the path otherwise.
void check_writable(const std::string& option, const std::string& path);

}  // namespace dsv4h::cli
