#include "runtime/work_clock.h"

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#if defined(__linux__)
#include <linux/perf_event.h>
#include <sys/syscall.h>
#endif

namespace kv {

namespace {

std::atomic<std::uint64_t> g_worker_cpu_ns{0};
std::atomic<std::uint64_t> g_worker_instructions{0};
thread_local WorkStamp t_caller_wait;
thread_local std::uint64_t t_caller_parallel_cpu_ns = 0;

#if defined(__linux__)
int open_instruction_counter() {
  perf_event_attr attr{};
  attr.size = sizeof(attr);
  attr.type = PERF_TYPE_HARDWARE;
  attr.config = PERF_COUNT_HW_INSTRUCTIONS;
  attr.exclude_kernel = 1;  // user space only: the engine's own code, not syscalls or faults
  attr.exclude_hv = 1;
  return static_cast<int>(::syscall(SYS_perf_event_open, &attr, 0, -1, -1, 0));
}
#endif

struct Probe {
  bool available = false;
  std::string reason;
};

const Probe& probe() {
  static const Probe p = [] {
    Probe r;
#if defined(__linux__)
    const int fd = open_instruction_counter();
    if (fd >= 0) {
      ::close(fd);
      r.available = true;
    } else {
      const int err = errno;
      r.reason = err == ENOENT || err == EOPNOTSUPP || err == ENODEV
                     ? std::string("no hardware counters on this machine (perf_event_open: ") + std::strerror(err) + ")"
                     : std::string("perf_event_open refused (") + std::strerror(err) +
                           "; see /proc/sys/kernel/perf_event_paranoid)";
    }
#else
    r.reason = "instruction counters are read through Linux perf_event_open";
#endif
    return r;
  }();
  return p;
}

// One counter per thread, opened on first use and closed with the thread.
struct ThreadCounter {
  int fd = -1;
  ThreadCounter() {
#if defined(__linux__)
    if (probe().available) fd = open_instruction_counter();
#endif
  }
  ~ThreadCounter() {
    if (fd >= 0) ::close(fd);
  }
  std::uint64_t read() const {
    std::uint64_t value = 0;
    if (fd < 0 || ::read(fd, &value, sizeof(value)) != static_cast<ssize_t>(sizeof(value))) return 0;
    return value;
  }
};

}  // namespace

std::uint64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

bool instructions_counted() { return probe().available; }
const std::string& instructions_unavailable_reason() { return probe().reason; }

WorkStamp thread_work() {
  WorkStamp s;
  s.cpu_ns = thread_cpu_ns();
  if (probe().available) {
    thread_local ThreadCounter counter;
    s.instructions = counter.read();
  }
  return s;
}

WorkStamp engine_work() {
  const WorkStamp own = thread_work();
  WorkStamp s;
  s.cpu_ns = own.cpu_ns - t_caller_wait.cpu_ns + g_worker_cpu_ns.load(std::memory_order_acquire);
  s.instructions = own.instructions - t_caller_wait.instructions + g_worker_instructions.load(std::memory_order_acquire);
  return s;
}

std::uint64_t serial_cpu_ns() { return thread_cpu_ns() - t_caller_parallel_cpu_ns; }

void burn_cpu_ns(std::uint64_t ns) {
  const std::uint64_t until = thread_cpu_ns() + ns;
  volatile std::uint64_t sink = 0;
  while (thread_cpu_ns() < until) {
    for (int i = 0; i < 256; ++i) sink = sink + static_cast<std::uint64_t>(i);
  }
}

namespace work_account {

void add_worker_work(const WorkStamp& work) {
  g_worker_cpu_ns.fetch_add(work.cpu_ns, std::memory_order_acq_rel);
  g_worker_instructions.fetch_add(work.instructions, std::memory_order_acq_rel);
}

void add_caller_time(const WorkStamp& inside, const WorkStamp& wait) {
  t_caller_parallel_cpu_ns += inside.cpu_ns;
  t_caller_wait.cpu_ns += wait.cpu_ns;
  t_caller_wait.instructions += wait.instructions;
}

}  // namespace work_account

}  // namespace kv
