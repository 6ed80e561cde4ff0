#include "cpu_probe.h"

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "runtime/work_clock.h"

namespace kvbench {

namespace {

// Large enough to leave L1, small enough to stay in any core's L2 or a slice of L3.
constexpr std::size_t kWords = 32 * 1024;
constexpr int kRounds = 320;

}  // namespace

std::vector<std::uint64_t> cpu_probe_buffer() {
  std::vector<std::uint64_t> buffer(kWords);
  for (std::size_t i = 0; i < kWords; ++i) buffer[i] = i * 0x9E3779B97F4A7C15ULL;
  return buffer;
}

std::uint64_t cpu_probe_job(std::vector<std::uint64_t>& buffer, int rounds) {
  // Four independent chains: the core's multipliers and load/store ports stay busy, as in the
  // engine's kernels, rather than one chain's latency.
  std::uint64_t x[4] = {0x243F6A8885A308D3ULL, 0x13198A2E03707344ULL, 0xA4093822299F31D0ULL, 0x082EFA98EC4E6C89ULL};
  const std::size_t words = buffer.size() - buffer.size() % 4;
  for (int r = 0; r < rounds; ++r) {
    for (std::size_t i = 0; i < words; i += 4) {
      for (std::size_t lane = 0; lane < 4; ++lane) {
        x[lane] = (x[lane] ^ buffer[i + lane]) * 0xBF58476D1CE4E5B9ULL;
        buffer[i + lane] += x[lane] >> 29;
      }
    }
  }
  return x[0] ^ x[1] ^ x[2] ^ x[3];
}

double cpu_probe_ms(int threads) {
  threads = std::max(threads, 1);
  std::vector<std::uint64_t> cpu_ns(static_cast<std::size_t>(threads), 0);
  std::vector<std::uint64_t> sums(cpu_ns.size(), 0);
  std::vector<std::thread> running;
  running.reserve(cpu_ns.size());
  try {
    for (std::size_t t = 0; t < cpu_ns.size(); ++t) {
      running.emplace_back([&, t] {
        std::vector<std::uint64_t> buffer = cpu_probe_buffer();
        const std::uint64_t start = kv::thread_cpu_ns();
        sums[t] = cpu_probe_job(buffer, kRounds);
        cpu_ns[t] = kv::thread_cpu_ns() - start;
      });
    }
  } catch (...) {  // a thread that could not start: join those that did, then report
    for (std::thread& t : running) t.join();
    throw;
  }
  for (std::thread& t : running) t.join();
  // The checksums are written where the optimiser must assume they are read.
  volatile std::uint64_t sink = 0;
  for (std::uint64_t s : sums) sink = sink + s;
  std::uint64_t total = 0;
  for (std::uint64_t ns : cpu_ns) total += ns;
  return static_cast<double>(total) / static_cast<double>(cpu_ns.size()) / 1e6;
}

}  // namespace kvbench
