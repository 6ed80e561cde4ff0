#include "interrupt.h"

#include <signal.h>

namespace kvbench {

namespace {

std::atomic<bool> g_requested{false};
std::atomic<int> g_signal{0};
struct sigaction g_old_int {};
struct sigaction g_old_term {};

static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "the handler may only touch lock-free atomics");

extern "C" void on_signal(int number) {
  if (g_requested.exchange(true)) {
    // The second signal: the default action now (async-signal-safe calls only).
    ::signal(number, SIG_DFL);
    ::raise(number);
    return;
  }
  g_signal.store(number);
}

}  // namespace

InterruptScope::InterruptScope() {
  g_requested.store(false);
  g_signal.store(0);
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a write to SQLite in progress completes
  ::sigaction(SIGINT, &action, &g_old_int);
  ::sigaction(SIGTERM, &action, &g_old_term);
}

InterruptScope::~InterruptScope() {
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
}

const std::atomic<bool>& InterruptScope::flag() { return g_requested; }

int InterruptScope::signal_number() { return g_signal.load(); }

}  // namespace kvbench
