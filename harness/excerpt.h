// Bounded quotes of user input for error messages: a message never repeats an input whole (a
// 600000-key case string, a tensor's data), and never cuts a UTF-8 character in two.
#pragma once

#include <cstddef>
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace dsv4h {

// `text` itself when at most `max_bytes` long, else its first bytes (whole UTF-8 characters) and
// "... (N bytes)".
std::string excerpt(const std::string& text, size_t max_bytes = 80);

// A JSON value as a message shows it: a scalar as JSON (a long string cut as excerpt() cuts it),
// an array or object only as what it is ("an array of 3 elements"), never dumped: a dump recurses
// once per level of nesting.
std::string describe_json(const nlohmann::json& value);

}  // namespace dsv4h
