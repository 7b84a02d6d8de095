// JSON files: read (BadInput naming the file), listed, written. Their own small library, used by the
// verification core (case files) and the nightly reports (perf/) alike.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dsv4h {

// The parsed document; BadInput naming the file when it cannot be read or parsed.
nlohmann::json read_json_file(const std::string& path);

// Every *.json in `dir`, sorted; an absent directory has none.
std::vector<std::string> json_files_in(const std::string& dir);

void write_json_file(const std::string& path, const nlohmann::json& document);

}  // namespace dsv4h
