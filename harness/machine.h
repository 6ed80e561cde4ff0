// What the machine is and how busy it was: the run metadata and the per-repetition noise that
// tells a regression from a busy neighbour.
#pragma once

#include <cstdint>
#include <string>

namespace kvbench {

struct MachineInfo {
  std::string cpu_model;
  std::string cpu_flags;       // the flags kvbench's kernels care about (avx2, fma, f16c, avx512*)
  int cores = 0;               // online logical CPUs
  std::uint64_t memory_bytes = 0;
  std::string os;              // PRETTY_NAME of /etc/os-release
  std::string kernel;          // uname -r
  std::string compiler;        // the compiler that built kvbench, and its flags
  std::string to_json() const;
};

MachineInfo machine_info();

// CPU time of the whole machine (from /proc/stat, steal included) and of this process, in
// clock ticks, so that the share used by others over an interval can be computed.
struct CpuSample {
  std::uint64_t busy = 0;   // user+nice+system+irq+softirq+steal, all CPUs
  std::uint64_t total = 0;  // busy + idle + iowait
  std::uint64_t self = 0;   // this process: utime+stime of /proc/self/stat
};
CpuSample cpu_sample();

struct Noise {
  double cpu_share = 0.0;   // noise_cpu_share: others' CPU time / all cores' time, 0..1
  double loadavg = 0.0;     // noise_loadavg: the 1-minute load average at the end
};

// The noise between two samples taken around a repetition.
Noise noise_between(const CpuSample& before, const CpuSample& after);

// Peak resident set size of this process (VmHWM), bytes; 0 when unreadable.
std::uint64_t peak_rss_bytes();
// Resets the peak to the current RSS (writes 5 to /proc/self/clear_refs), so that the next
// peak_rss_bytes() covers only what follows. False when the kernel refuses.
bool reset_peak_rss();

}  // namespace kvbench
