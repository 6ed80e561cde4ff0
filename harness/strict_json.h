// JSON parsing for configuration files: duplicate keys are refused (nlohmann keeps the last one
// silently) and malformed text names the file and byte offset.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace kvbench {

// Throws kv::InputError(file, key or "byte N", reason).
nlohmann::json parse_strict(const std::string& text, const std::string& file);

}  // namespace kvbench
