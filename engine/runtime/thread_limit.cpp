#include "runtime/thread_limit.h"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <thread>

#include "runtime/error.h"

namespace kv {

int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

int max_pool_threads() {
  const char* text = std::getenv("KVBENCH_MAX_THREADS");
  if (text == nullptr) return 2 * hardware_threads();
  long value = 0;
  const std::string_view view(text);
  const auto [end, error] = std::from_chars(view.data(), view.data() + view.size(), value);
  if (view.empty() || error != std::errc() || end != view.data() + view.size() || value < 1 || value > kMaxThreadsEver) {
    throw InputError("environment", "KVBENCH_MAX_THREADS",
                     "'" + std::string(view) + "' is not a whole number in 1.." + std::to_string(kMaxThreadsEver));
  }
  return static_cast<int>(value);
}

std::string thread_count_problem(long requested) {
  if (requested < 0) return std::to_string(requested) + " is below 0 (0 means one thread per hardware thread)";
  if (requested > kMaxThreadsEver) {
    return std::to_string(requested) + " is not in 0.." + std::to_string(kMaxThreadsEver);
  }
  const int limit = max_pool_threads();
  if (requested > limit) {
    const bool overridden = std::getenv("KVBENCH_MAX_THREADS") != nullptr;
    return std::to_string(requested) + " threads is more than " +
           (overridden ? "KVBENCH_MAX_THREADS (" + std::to_string(limit) + ")"
                       : "twice this machine's " + std::to_string(hardware_threads()) + " hardware threads (" +
                             std::to_string(limit) + "): threads beyond the cores only wait for one another; " +
                             "set KVBENCH_MAX_THREADS to allow more");
  }
  return "";
}

void check_thread_count(long requested, const std::string& where, const std::string& field) {
  const std::string problem = thread_count_problem(requested);
  if (!problem.empty()) throw InputError(where, field, problem);
}

}  // namespace kv
