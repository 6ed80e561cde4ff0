#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "machine.h"

using namespace kvbench;

TEST_CASE("machine info names the CPU, cores, memory and OS", "[machine]") {
  const MachineInfo m = machine_info();
  CHECK(m.cores >= 1);
  CHECK(m.memory_bytes > (64ull << 20));
  CHECK_FALSE(m.kernel.empty());
  CHECK_FALSE(m.compiler.empty());
  CHECK(m.to_json().find("\"cores\"") != std::string::npos);
}

TEST_CASE("noise counts other processes' CPU time, not our own", "[machine]") {
  // Our own busy loop is not noise (its share is the rest of the machine's).
  CpuSample before = cpu_sample();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  volatile double sink = 0.0;
  while (std::chrono::steady_clock::now() < until) sink = sink + 1.0;
  Noise own = noise_between(before, cpu_sample());
  // Another process spinning on a core is.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    volatile double spin = 0.0;
    for (;;) spin = spin + 1.0;
  }
  before = cpu_sample();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const Noise busy = noise_between(before, cpu_sample());
  ::kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  CAPTURE(own.cpu_share, busy.cpu_share);
  CHECK(busy.cpu_share >= 0.0);
  CHECK(busy.cpu_share <= 1.0);
  // One spinning child on n cores is about 1/n of the machine; allow for a loaded host.
  CHECK(busy.cpu_share > 0.5 / static_cast<double>(machine_info().cores));
  CHECK(own.cpu_share >= 0.0);  // our own loop is subtracted; other tests may run beside us
  CHECK(own.cpu_share <= 1.0);
  CHECK(busy.loadavg >= 0.0);
}
