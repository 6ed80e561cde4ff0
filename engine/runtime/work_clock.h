// What the engine's threads spent on work, as signals that survive a busy machine: CPU time
// (thread CPU clocks) and, where the kernel exposes a PMU, user-space instructions retired.
// Wall time grows when the engine's threads wait for a core; these do not.
//
// Work is the calling thread's own time outside ThreadPool::parallel_for, plus every pool
// thread's time inside work items (its own items and the workers'). Polling and sleeping
// between items - the pool's spin before it sleeps, the caller's wait for the last item - are
// left out, so a figure does not depend on how long a thread waited for a core.
//
// The workers' share is one process-wide account: spans are read on the thread that drives
// the engine (one case at a time), which is what kvbench's runner does.
#pragma once

#include <cstdint>
#include <string>

namespace kv {

struct WorkStamp {
  std::uint64_t cpu_ns = 0;
  std::uint64_t instructions = 0;  // 0 when !instructions_counted()
};

inline WorkStamp operator-(const WorkStamp& a, const WorkStamp& b) {
  return {a.cpu_ns - b.cpu_ns, a.instructions - b.instructions};
}

// The engine's work so far as seen from the calling (driving) thread; take two and subtract.
WorkStamp engine_work();

// True when instructions are counted on this machine; otherwise why not ("no PMU: ...").
bool instructions_counted();
const std::string& instructions_unavailable_reason();

// The calling thread's CPU time, ns (CLOCK_THREAD_CPUTIME_ID).
std::uint64_t thread_cpu_ns();
// The calling thread's own work stamp (its CPU and, where counted, its instructions).
WorkStamp thread_work();
// The calling thread's CPU time outside parallel_for calls (its serial work), ns.
std::uint64_t serial_cpu_ns();
// Busy work on the calling thread until its CPU clock has advanced by `ns` (test_slowdown:
// extra work in the thread's own CPU time, which contention does not shorten).
void burn_cpu_ns(std::uint64_t ns);

namespace work_account {
// Used by ThreadPool: work done in items on worker threads, and the part of the calling
// thread's time inside parallel_for that was not item work.
void add_worker_work(const WorkStamp& work);
// `inside`: the caller's whole time in one parallel_for; `wait`: the part not spent on items.
void add_caller_time(const WorkStamp& inside, const WorkStamp& wait);
}  // namespace work_account

}  // namespace kv
