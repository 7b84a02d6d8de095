// A case: one component, one value per parameter and a seed. Its canonical string, e.g.
// `filtered_silu_mul(rows=77,inter=2048,kept=0.5,step=1,limit=10,adversarial=0,seed=42)`, is the
// gtest name suffix, the JSON key, the dsv4h filter and the reproduction argument.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace dsv4h {

enum class ParamKind { integer, real };

struct ParamSpec {
  std::string name;
  ParamKind kind;
  std::string default_value;
  std::string help;
};

class Case {
 public:
  // Values are checked against the schema: unknown names, non-numbers and integers with a
  // fraction are BadInput naming the parameter; missing ones take their defaults.
  Case(std::string component, const std::vector<ParamSpec>& schema,
       const std::map<std::string, std::string>& values, uint64_t seed);

  const std::string& component() const { return component_; }
  uint64_t seed() const { return seed_; }
  int64_t integer(const std::string& name) const;
  double real(const std::string& name) const;
  Case with(const std::string& name, const std::string& value) const;
  Case with_seed(uint64_t seed) const;

  std::string str() const;        // canonical string
  std::string test_name() const;  // the canonical string with [^A-Za-z0-9] mapped to '_'

 private:
  const std::string& raw(const std::string& name) const;

  std::string component_;
  std::vector<ParamSpec> schema_;
  std::vector<std::pair<std::string, std::string>> values_;  // canonical, in schema order
  uint64_t seed_;
};

// Splits "name(k=v,...)" into the component name and its values (seed among them, if given).
// Syntax errors are BadInput quoting the text.
std::pair<std::string, std::map<std::string, std::string>> split_case_string(const std::string& text);

}  // namespace dsv4h
