#include <algorithm>
#include <sstream>

#include "../descriptor.h"
#include "../errors.h"
#include "../excerpt.h"

namespace dsv4h {

void Registry::add(Component component) { components_.push_back(std::move(component)); }

const Component& Registry::get(const std::string& name) const {
  for (const Component& c : components_)
    if (c.name == name) return c;
  std::string names;
  for (const Component& c : components_) names += (names.empty() ? "" : ", ") + c.name;
  throw BadInput("unknown component \"" + excerpt(name, 60) + "\" (known: " + names + ")");
}

std::vector<Component> all_component_descriptors();  // generated: cmake/components.cmake

const Registry& registry() {
  static const Registry r = [] {
    std::vector<Component> components = all_component_descriptors();
    std::sort(components.begin(), components.end(),
              [](const Component& a, const Component& b) { return a.name < b.name; });
    Registry all;
    for (Component& c : components) all.add(std::move(c));
    return all;
  }();
  return r;
}

std::string gpu_test_filter(const std::string& component, const std::string& own) {
  return "*" + component + "*" + (own.empty() ? "" : ":" + own);
}

nlohmann::json parse_goals(const std::string& component, const std::string& text) {
  nlohmann::json goals;
  try {
    goals = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw std::logic_error(component + ": goals are not JSON: " + e.what());
  }
  if (!goals.is_array()) throw std::logic_error(component + ": goals must be a JSON array");
  for (const nlohmann::json& g : goals)
    if (!g.is_object() || !g.contains("text") || !g.contains("measure") || !g.contains("bound") ||
        (g.contains("benchmark") == g.contains("match")))
      throw std::logic_error(component + ": a goal needs text, measure, bound and one of benchmark or match: " + g.dump());
  return goals;
}

Mutant make_mutant(const std::string& name, const std::string& sources, const std::string& bug, bool race) {
  Mutant m{name, {}, bug, race};
  std::istringstream words(sources);
  for (std::string source; words >> source;) m.kernel_sources.push_back(source);
  return m;
}

Case parse_case(const std::string& text, uint64_t default_seed) {
  auto [name, values] = split_case_string(text);
  const Component& component = registry().get(name);
  uint64_t seed = default_seed;
  if (auto it = values.find("seed"); it != values.end()) {
    const std::string& s = it->second;
    if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos)
      throw BadInput(name + ": seed must be a non-negative integer below 10^19, got \"" + excerpt(s, 40) + "\"");
    seed = std::stoull(s);
    values.erase(it);
  }
  return Case(name, component.params, values, seed);
}

TensorMap checked_outputs(const Component& component, const Case& c, const TensorMap& inputs) {
  component.validate_inputs(c, inputs);
  TensorMap outputs = component.make_outputs(c);
  // A poison must be a value no run produces: a one-byte output has none (fp8's are its NaN and
  // saturation codes). Such outputs travel as i32 words, as memory_pool's pools do.
  for (const auto& [name, t] : outputs)
    if (t.dtype() == DType::fp8_e4m3 || t.dtype() == DType::u8)
      throw std::logic_error(component.name + ": output \"" + name + "\" is " + dtype_name(t.dtype()) +
                             ", which no poison can mark as unwritten: make it i32 words");
  return outputs;
}

OutputCheck output_check(const Component& component, const Case& c, const std::string& output, DType dtype) {
  if (component.checks) {
    const std::map<std::string, OutputCheck> checks = component.checks(c);
    if (auto it = checks.find(output); it != checks.end()) return it->second;
  }
  OutputCheck check;
  check.tolerance = tolerance_for(dtype);
  return check;
}

TensorMap reference_outputs(const Component& component, const Case& c, const TensorMap& inputs, Poison poison) {
  TensorMap outputs = checked_outputs(component, c, inputs);
  fill_poison(outputs, poison);
  component.reference(c, inputs, outputs);
  return outputs;
}

void mask_unchecked(const Component& component, const Case& c, TensorMap& outputs, Poison poison) {
  if (component.unchecked) component.unchecked(c, outputs, poison);
}

}  // namespace dsv4h
