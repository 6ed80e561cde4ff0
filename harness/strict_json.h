// JSON parsing for configuration files: duplicate keys are refused (nlohmann keeps the last one
// silently), malformed text names the file and byte offset, and a number beyond a double's
// range (1e400) names the JSON pointer of the value.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kvbench {

// Throws kv::InputError(file, JSON pointer or "byte N", reason).
nlohmann::json parse_strict(const std::string& text, const std::string& file);

}  // namespace kvbench
