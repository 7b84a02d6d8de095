#include "case_spec.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "compare.h"
#include "errors.h"
#include "excerpt.h"

namespace dsv4h {
namespace {

std::string canonical_value(const ParamSpec& spec, const std::string& component, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  const std::string where = component + ": parameter \"" + spec.name + "\"";
  // strtod also reads hexadecimal ("0x10"): a case string's numbers are decimal only. It reads
  // 1e-400 as 0 and says so in errno: a value a double cannot hold is refused, never rounded to 0.
  if (text.empty() || *end != '\0' || !std::isfinite(value) || text.find_first_of("xX") != std::string::npos)
    throw BadInput(where + " must be a finite decimal number, got \"" + excerpt(text, 40) + "\"");
  if (errno == ERANGE)
    throw BadInput(where + ": \"" + excerpt(text, 40) + "\" is beyond what a double holds (it would read as " +
                   format_value(value) + ")");
  if (spec.kind == ParamKind::integer) {
    if (value != std::floor(value) || std::fabs(value) > 9.0e15)
      throw BadInput(where + " must be an integer, got \"" + excerpt(text, 40) + "\"");
    return std::to_string(static_cast<int64_t>(value));
  }
  return format_value(value);
}

std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace

Case::Case(std::string component, const std::vector<ParamSpec>& schema,
           const std::map<std::string, std::string>& values, uint64_t seed)
    : component_(std::move(component)), schema_(schema), seed_(seed) {
  for (const auto& [name, value] : values) {
    bool known = false;
    for (const ParamSpec& spec : schema) known = known || spec.name == name;
    if (!known) {
      std::string names;
      for (const ParamSpec& spec : schema) names += (names.empty() ? "" : ", ") + spec.name;
      throw BadInput(component_ + ": unknown parameter \"" + excerpt(name, 40) + "\" (known: " + names + ", seed)");
    }
  }
  for (const ParamSpec& spec : schema) {
    auto it = values.find(spec.name);
    values_.emplace_back(spec.name, canonical_value(spec, component_, it == values.end() ? spec.default_value : it->second));
  }
}

const std::string& Case::raw(const std::string& name) const {
  for (const auto& [key, value] : values_)
    if (key == name) return value;
  throw std::logic_error(component_ + " has no parameter \"" + name + "\"");
}

int64_t Case::integer(const std::string& name) const { return std::strtoll(raw(name).c_str(), nullptr, 10); }
double Case::real(const std::string& name) const { return std::strtod(raw(name).c_str(), nullptr); }

Case Case::with(const std::string& name, const std::string& value) const {
  std::map<std::string, std::string> values(values_.begin(), values_.end());
  values[name] = value;
  return Case(component_, schema_, values, seed_);
}

Case Case::with_seed(uint64_t seed) const {
  Case c = *this;
  c.seed_ = seed;
  return c;
}

std::string Case::str() const {
  std::string s = component_ + "(";
  for (const auto& [key, value] : values_) s += key + "=" + value + ",";
  return s + "seed=" + std::to_string(seed_) + ")";
}

std::string Case::test_name() const {
  std::string s = str();
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  while (!s.empty() && s.back() == '_') s.pop_back();
  return s;
}

std::pair<std::string, std::map<std::string, std::string>> split_case_string(const std::string& text) {
  const std::string t = trim(text);
  const size_t open = t.find('(');
  const auto bad = [&](const std::string& why) {
    return BadInput("case \"" + excerpt(text) + "\": " + why + " (expected e.g. name(key=value,...,seed=N))");
  };
  if (open == std::string::npos) return {t, {}};
  if (t.back() != ')') throw bad("missing closing parenthesis");
  const std::string name = trim(t.substr(0, open));
  if (name.empty()) throw bad("no component name");
  std::map<std::string, std::string> values;
  const std::string body = t.substr(open + 1, t.size() - open - 2);
  if (trim(body).empty()) return {name, values};
  // One pass over the body: each item is trimmed on its own, never the rest of the body.
  for (size_t pos = 0; pos <= body.size();) {
    const size_t comma = std::min(body.find(',', pos), body.size());
    const std::string item = trim(body.substr(pos, comma - pos));
    const size_t eq = item.find('=');
    if (eq == std::string::npos) throw bad("\"" + excerpt(item, 40) + "\" is not key=value");
    const std::string key = trim(item.substr(0, eq));
    if (values.count(key)) throw bad("\"" + excerpt(key, 40) + "\" given twice");
    values[key] = trim(item.substr(eq + 1));
    pos = comma + 1;
  }
  return {name, values};
}

}  // namespace dsv4h
