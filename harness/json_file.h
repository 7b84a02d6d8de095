// JSON files: read (BadInput naming the file), listed, written. Their own small library, used by the
// verification core (case files) and the nightly reports (perf/) alike.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace dsv4h {

// Arrays and objects nest at most this deep in a document we read: no file of ours nests beyond 6,
// and nlohmann's dump, copy and comparison recurse once per level (100000 levels overflow the stack).
constexpr int kMaxJsonDepth = 64;

// The parsed document; BadInput naming the file when it cannot be read or parsed, or nests deeper
// than kMaxJsonDepth.
nlohmann::json read_json_file(const std::string& path);

// The same for text already in memory; `where` names it in messages.
nlohmann::json parse_json_text(const std::string& text, const std::string& where);

// Every *.json in `dir`, sorted; an absent directory has none.
std::vector<std::string> json_files_in(const std::string& dir);

// Strings that are not UTF-8 (a commit label cut inside a character, a file name) are written with
// U+FFFD in place of each bad byte, not refused. A write that fails (a full disk) is a runtime_error.
void write_json_file(const std::string& path, const nlohmann::json& document);

}  // namespace dsv4h
