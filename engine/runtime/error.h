// Errors for bad input at the engine's boundary: every one names where (a file, a config
// field, an API argument), what, and why, so the CLI can print it and exit non-zero.
#pragma once

#include <stdexcept>
#include <string>

namespace kv {

class InputError : public std::runtime_error {
 public:
  // where: a file path or an API name; field: the field/offset/argument; reason: why it is bad.
  InputError(std::string where, std::string field, std::string reason);

  const std::string& where() const { return where_; }
  const std::string& field() const { return field_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string where_;
  std::string field_;
  std::string reason_;
};

// Programmer errors: a broken invariant inside the engine, never user input.
[[noreturn]] void assertion_failed(const char* expr, const char* message, const char* file, int line);

}  // namespace kv

#define KV_ASSERT(expr, message) \
  ((expr) ? static_cast<void>(0) : ::kv::assertion_failed(#expr, message, __FILE__, __LINE__))
