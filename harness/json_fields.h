// Reading one JSON object of a configuration: typed getters with defaults and ranges, unknown
// fields refused, and every error an InputError naming the file, the JSON path and the reason.
#pragma once

#include <cmath>
#include <cstdint>
#include <set>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "suite_config.h"

namespace kvbench {


namespace json_fields {

using json = nlohmann::json;

[[noreturn]] inline void fail(const std::string& file, const std::string& path, const std::string& reason) {
  throw kv::InputError(file, path.empty() ? "/" : path, reason);
}

// One JSON object being read: typed getters with defaults, and unknown fields refused.
class Fields {
 public:
  Fields(const json& object, std::string path, const std::string& file) : j_(object), path_(std::move(path)), file_(file) {
    if (!j_.is_object()) fail(file_, path_, "must be an object");
  }
  const std::string& path() const { return path_; }
  std::string at(const std::string& key) const { return path_ + "/" + key; }
  bool has(const std::string& key) const { return j_.contains(key); }
  const json* child(const std::string& key) {
    used_.insert(key);
    return j_.contains(key) ? &j_.at(key) : nullptr;
  }
  std::string string(const std::string& key, const std::string& fallback, bool required = false) {
    const json* v = child(key);
    if (v == nullptr) {
      if (required) fail(file_, at(key), "is required");
      return fallback;
    }
    if (!v->is_string()) fail(file_, at(key), "must be a string");
    return v->get<std::string>();
  }
  // A name that becomes part of a case's name (model/workload/policy/soc) or a suite's.
  std::string name(const std::string& key) {
    const std::string value = string(key, "", true);
    const std::string problem = name_problem(value);
    if (!problem.empty()) fail(file_, at(key), problem);
    return value;
  }
  std::int64_t integer(const std::string& key, std::int64_t fallback, std::int64_t lo, std::int64_t hi) {
    const json* v = child(key);
    if (v == nullptr) return fallback;
    if (!v->is_number_integer()) fail(file_, at(key), "must be an integer");
    const auto x = v->get<std::int64_t>();
    if (x < lo || x > hi) fail(file_, at(key), std::to_string(x) + " must be in " + std::to_string(lo) + ".." + std::to_string(hi));
    return x;
  }
  double number(const std::string& key, double fallback) {
    const json* v = child(key);
    if (v == nullptr) return fallback;
    if (!v->is_number()) fail(file_, at(key), "must be a number");
    const double x = v->get<double>();
    if (!std::isfinite(x)) fail(file_, at(key), "must be finite");
    return x;
  }
  bool boolean(const std::string& key, bool fallback) {
    const json* v = child(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(file_, at(key), "must be true or false");
    return v->get<bool>();
  }
  std::uint64_t size(const std::string& key, std::uint64_t fallback) {
    const json* v = child(key);
    if (v == nullptr) return fallback;
    if (v->is_number_unsigned()) return v->get<std::uint64_t>();
    if (v->is_string()) return parse_size(v->get<std::string>(), file_, at(key));
    fail(file_, at(key), "must be a byte count or a size string such as \"64MiB\"");
  }
  void done() const {
    for (const auto& item : j_.items()) {
      if (used_.count(item.key()) == 0) fail(file_, at(item.key()), "unknown field");
    }
  }

 private:
  const json& j_;
  std::string path_;
  const std::string& file_;
  std::set<std::string> used_;
};


// A float field as the decimal it was written as (0.9, not 0.8999999761581421): fmt prints the
// shortest text that reads back as the same float.
inline double shortest(float value) { return std::stod(fmt::format("{}", value)); }

// An engine validator's InputError, re-addressed to the file and JSON path.
template <class F>
void rethrow_at(const std::string& file, const std::string& path, F&& validate) {
  try {
    validate();
  } catch (const kv::InputError& e) {
    fail(file, path + "/" + e.field(), e.reason());
  }
}

}  // namespace json_fields
}  // namespace kvbench
