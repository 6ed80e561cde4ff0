// A monotonic clock in nanoseconds, for measured waits and I/O times (clock host).
#pragma once

#include <chrono>
#include <cstdint>

namespace kv {

inline std::uint64_t monotonic_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

}  // namespace kv
