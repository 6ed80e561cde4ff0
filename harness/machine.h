// What the machine is and how busy it was: the run metadata and the per-repetition noise that
// tells a regression from a busy neighbour.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace kvbench {

struct MachineInfo {
  std::string cpu_model;
  std::string cpu_flags;       // the flags kvbench's kernels care about (avx2, fma, f16c, avx512*; asimd, asimddp, i8mm, asimdhp)
  int cores = 0;               // online logical CPUs
  std::uint64_t memory_bytes = 0;
  std::string os;              // PRETTY_NAME of /etc/os-release
  std::string kernel;          // uname -r
  std::string compiler;        // the compiler that built kvbench, and its flags
  std::string cpu_governor;    // cpufreq governor of the engine's cores ("" where sysfs has none)
  // The board: the device tree's model (Arm boards), else DMI's vendor and product (PCs and
  // servers); "" where neither is exposed.
  std::string board;
  std::string to_json() const;
};

MachineInfo machine_info();

// The CPU from /proc/cpuinfo's text: its "model name" (x86), else, on Arm, the cores named from
// their "CPU implementer" and "CPU part" (big.LITTLE: each kind once, in the order listed, e.g.
// "Arm Cortex-A55 + Cortex-A76"; a part kvbench does not know by its number); "" when neither.
std::string cpu_model_from_cpuinfo(const std::string& cpuinfo);

// The board's name under the sysfs root `root` (normally /sys; tests build a fake tree).
std::string board_name(const std::string& root);

// The size of cpu0's level-2 cache from sysfs, bytes; 0 when sysfs does not say.
std::uint64_t l2_cache_bytes();

// CPU time of the whole machine (from /proc/stat, steal included) and of this process, in
// clock ticks, so that the share used by others over an interval can be computed.
struct CpuSample {
  std::uint64_t busy = 0;   // user+nice+system+irq+softirq+steal, all CPUs
  std::uint64_t total = 0;  // busy + idle + iowait
  std::uint64_t self = 0;   // this process: utime+stime of /proc/self/stat
};
CpuSample cpu_sample();

// Run-queue wait of this process's threads: the time each was ready to run but waited for a
// core (the second field of /proc/self/task/<tid>/schedstat), ns, by thread id. Threads that
// start between two samples count from zero; sample before they exit.
struct RunQueueSample {
  std::map<int, std::uint64_t> wait_ns;
  bool available = false;  // false where the kernel keeps no schedstat
  std::uint64_t at_ns = 0; // monotonic time of the sample
};
RunQueueSample run_queue_sample();

struct Noise {
  // noise_cpu_share: others' CPU time / all cores' time, 0..1; nullopt when the interval holds
  // too few of /proc/stat's ticks for the share to mean anything (one tick over a short
  // repetition is several percent).
  std::optional<double> cpu_share;
  std::uint64_t cpu_ticks = 0;  // all cores' ticks in the interval
  double loadavg = 0.0;         // noise_loadavg: the 1-minute load average at the end
  // noise_run_queue_ms and its share of the wall time; nullopt without schedstat.
  std::optional<double> run_queue_ms, run_queue_share;
  // What decides `noisy`: the run-queue share, else (no schedstat) the CPU share; nullopt when
  // neither could be measured (a repetition that is then taken as noisy, never as quiet).
  std::optional<double> contention() const { return run_queue_share ? run_queue_share : cpu_share; }
};

// Fewer ticks than this (all cores) and the CPU share is not stated.
inline constexpr std::uint64_t kMinNoiseTicks = 100;

// The noise between two pairs of samples taken around a repetition.
Noise noise_between(const CpuSample& before, const CpuSample& after, const RunQueueSample& queue_before,
                    const RunQueueSample& queue_after);

// Peak resident set size of this process (VmHWM), bytes; 0 when unreadable.
std::uint64_t peak_rss_bytes();
// Returns freed heap to the system (malloc_trim), then resets the peak to the current RSS
// (writes 5 to /proc/self/clear_refs), so that the next peak_rss_bytes() covers only what
// follows. False when the kernel refuses.
bool reset_peak_rss();

}  // namespace kvbench
