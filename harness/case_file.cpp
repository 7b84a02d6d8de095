#include "case_file.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "component.h"
#include "errors.h"
#include "poison.h"
#include "tensor_json.h"

namespace dsv4h {

CaseFile load_case_file(const std::string& path) { return case_file_from_json(read_json_file(path), path); }

CaseFile case_file_from_json(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) throw BadInput(path + ": expected a JSON object");
  for (const auto& [key, value] : j.items())
    if (key != "component" && key != "case" && key != "seed" && key != "note" && key != "inputs" && key != "outputs")
      throw BadInput(path + ": unknown field \"" + key + "\" (fields: component, case, seed, note, inputs, outputs)");
  for (const char* key : {"component", "case"})
    if (!j.contains(key) || !j[key].is_string()) throw BadInput(path + ": field \"" + key + "\" must be a string");
  if (j.contains("seed") && !(j["seed"].is_number_unsigned() && j["seed"].get<uint64_t>() < kSeedLimit))
    throw BadInput(path + ": field \"seed\" must be a non-negative integer below 10^19");

  const std::string component = j["component"].get<std::string>();
  const std::string text = j["case"].get<std::string>();
  const uint64_t file_seed = j.value("seed", uint64_t{1});
  Case c = [&] {
    try {
      return parse_case(text, file_seed);
    } catch (const BadInput& e) {
      throw BadInput(path + ": field \"case\": " + e.what());
    }
  }();
  if (c.component() != component)
    throw BadInput(path + ": field \"component\" is \"" + component + "\" but the case is of \"" + c.component() + "\"");
  if (j.contains("seed") && c.seed() != file_seed)
    throw BadInput(path + ": field \"seed\" (" + std::to_string(file_seed) + ") disagrees with the case's seed (" +
                   std::to_string(c.seed()) + ")");

  CaseFile file{path, c, std::nullopt, std::nullopt};
  if (j.contains("inputs")) file.inputs = tensors_from_json(j["inputs"], path + ": inputs");
  if (j.contains("outputs")) {
    if (!j["outputs"].is_object()) throw BadInput(path + ": field \"outputs\" must be an object");
    // A misspelt "expected" would silently skip the comparison with the stored outputs.
    for (const auto& [key, value] : j["outputs"].items())
      if (key != "expected" && key != "reference" && key != "gpu")
        throw BadInput(path + ": unknown field \"outputs." + key + "\" (fields: expected, reference, gpu)");
    if (j["outputs"].contains("expected")) {
      file.expected = tensors_from_json(j["outputs"]["expected"], path + ": outputs.expected");
      // "nan" there marks an element that must stay unwritten: make it the poison runs compare with.
      for (auto& [name, t] : *file.expected)
        if (dtype_is_float(t.dtype()))
          for (int64_t i = 0; i < t.numel(); ++i)
            if (std::isnan(t.get(i))) t.set_bits(i, poison_bits(t.dtype(), Poison::a));
    }
  }
  if (file.expected && !file.inputs) throw BadInput(path + ": outputs.expected needs the inputs it was computed from");
  if (file.expected) {
    const TensorMap outputs = registry().get(c.component()).make_outputs(c);
    for (const auto& [name, t] : *file.expected) {
      auto it = outputs.find(name);
      if (it == outputs.end()) throw BadInput(path + ": outputs.expected." + name + " is not an output of " + c.component());
      if (t.dtype() != it->second.dtype() || t.shape() != it->second.shape())
        throw BadInput(path + ": outputs.expected." + name + " is " + dtype_name(t.dtype()) + shape_string(t.shape()) +
                       ", the case's output is " + dtype_name(it->second.dtype()) + shape_string(it->second.shape()));
    }
    for (const auto& [name, t] : outputs)
      if (!file.expected->count(name)) throw BadInput(path + ": outputs.expected lacks the output \"" + name + "\"");
  }
  return file;
}

void write_case_document(std::ostream& out, const Case& c, const TensorMap& inputs,
                         const std::map<std::string, TensorMap>& outputs_by_backend, const std::string& note) {
  const auto string = [](const std::string& text) {
    return nlohmann::json(text).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  out << "{\n \"component\": " << string(c.component()) << ",\n \"case\": " << string(c.str()) << ",\n \"seed\": " << c.seed()
      << ",\n";
  if (!note.empty()) out << " \"note\": " << string(note) << ",\n";
  out << " \"inputs\": ";
  write_tensors_json(out, inputs, " ");
  out << ",\n \"outputs\": {";
  const char* separator = "\n";
  for (const auto& [backend, tensors] : outputs_by_backend) {
    out << separator << "  " << string(backend) << ": ";
    write_tensors_json(out, tensors, "  ");
    separator = ",\n";
  }
  out << (outputs_by_backend.empty() ? "}" : "\n }") << "\n}\n";
}

void write_case_file(const std::string& path, const Case& c, const TensorMap& inputs,
                     const std::map<std::string, TensorMap>& outputs_by_backend, const std::string& note) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(path);
  write_case_document(out, c, inputs, outputs_by_backend, note);
  out.close();  // a full disk shows only when the buffer is flushed
  if (out.fail()) throw std::runtime_error("cannot write " + path);
}

uint64_t case_document_bytes_bound(const TensorMap& inputs, const std::map<std::string, TensorMap>& outputs_by_backend) {
  uint64_t bytes = 1024 + tensors_json_bytes_bound(inputs, true);
  for (const auto& [backend, tensors] : outputs_by_backend) bytes += 32 + tensors_json_bytes_bound(tensors, false);
  return bytes;
}

std::string fixtures_dir() {
  if (const char* env = std::getenv("DSV4H_FIXTURES")) return env;
  if (std::filesystem::is_directory("fixtures/filtered_silu_mul")) return "fixtures";
  // An installed dsv4h (or test binary): PREFIX/bin or PREFIX/libexec/dsv4h, fixtures in PREFIX/share.
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error)
    for (const std::filesystem::path& up : {exe.parent_path().parent_path(), exe.parent_path().parent_path().parent_path()})
      if (std::filesystem::is_directory(up / "share/dsv4h/fixtures")) return (up / "share/dsv4h/fixtures").string();
  return DSV4H_SOURCE_DIR "/fixtures";
}

}  // namespace dsv4h
