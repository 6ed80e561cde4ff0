// The executor's wall-clock timing, shared by its sources (executor.cpp, executor_decode.cpp).
#pragma once

#include <chrono>

namespace kvbench {
namespace {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace
}  // namespace kvbench
