// A component's parameters as one typed struct, declared once: each member is named, defaulted and
// explained in the struct's `fields` function, from which the harness derives the case schema
// (names, kinds, defaults, help) and into which it parses a case's values. Descriptors and GPU
// bindings read members (`c.bs`, `c.mode == Mode::prefill`), never strings.
//
//   struct Params {
//     int64_t bs = 8;
//     Mode mode = Mode::decode;  // an enum: written as its integer in case strings
//     template <typename F> void fields(F& f) { f("bs", bs, "requests"); f("mode", mode, "0 decode, ..."); }
//   };
#pragma once

#include <string>
#include <type_traits>
#include <vector>

#include "case_spec.h"
#include "compare.h"

namespace dsv4h {

namespace detail {

struct SchemaOf {
  std::vector<ParamSpec> specs;
  template <typename T>
  void operator()(const char* name, const T& value, const char* help) {
    if constexpr (std::is_floating_point_v<T>)
      specs.push_back({name, ParamKind::real, format_value(value), help});
    else
      specs.push_back({name, ParamKind::integer, std::to_string(static_cast<int64_t>(value)), help});
  }
};

struct ReadFrom {
  const Case& c;
  template <typename T>
  void operator()(const char* name, T& value, const char*) {
    if constexpr (std::is_floating_point_v<T>) value = c.real(name);
    else value = static_cast<T>(c.integer(name));
  }
};

}  // namespace detail

template <typename P>
std::vector<ParamSpec> param_schema() {
  P defaults;
  detail::SchemaOf schema;
  defaults.fields(schema);
  return schema.specs;
}

// A case of one component with its parameters parsed into P; `str()` and `seed()` as the case's.
template <typename P>
class CaseOf : public P {
 public:
  explicit CaseOf(const Case& c) : P(), case_(c) {
    detail::ReadFrom read{c};
    this->fields(read);
  }
  const Case& untyped() const { return case_; }
  uint64_t seed() const { return case_.seed(); }
  std::string str() const { return case_.str(); }

 private:
  const Case& case_;
};

}  // namespace dsv4h
