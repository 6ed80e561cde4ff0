#include "runtime/error.h"

#include <cstdio>
#include <cstdlib>

namespace kv {

namespace {
std::string join_message(const std::string& where, const std::string& field, const std::string& reason) {
  std::string message = where;
  if (!field.empty()) message += ": " + field;
  message += ": " + reason;
  return message;
}
}  // namespace

InputError::InputError(std::string where, std::string field, std::string reason)
    : std::runtime_error(join_message(where, field, reason)),
      where_(std::move(where)),
      field_(std::move(field)),
      reason_(std::move(reason)) {}

void assertion_failed(const char* expr, const char* message, const char* file, int line) {
  std::fprintf(stderr, "kvbench internal error: %s (%s) at %s:%d\n", message, expr, file, line);
  std::abort();
}

}  // namespace kv
