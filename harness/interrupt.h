// SIGINT and SIGTERM during `kvbench run`: the first signal only sets a flag that the runner
// and the executor poll, so the repetition in flight is dropped whole, the run is marked
// interrupted and its L2 files go; a second signal ends the process at once (the next kvbench
// that opens the database marks that run aborted).
#pragma once

#include <atomic>

namespace kvbench {

// Installs the handlers for its lifetime and restores the previous ones after.
class InterruptScope {
 public:
  InterruptScope();
  ~InterruptScope();
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

  // Set by the first signal.
  static const std::atomic<bool>& flag();
  // The signal that set it (0: none).
  static int signal_number();
};

inline constexpr int kExitInterrupted = 130;

}  // namespace kvbench
