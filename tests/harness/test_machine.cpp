#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "machine.h"
#include "test_support.h"

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
  RunQueueSample queue = run_queue_sample();
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
  volatile double sink = 0.0;
  while (std::chrono::steady_clock::now() < until) sink = sink + 1.0;
  Noise own = noise_between(before, cpu_sample(), queue, run_queue_sample());
  // Another process spinning on a core is.
  Noise busy;
  {
    kvtest::BusyCore child;
    before = cpu_sample();
    queue = run_queue_sample();
    std::this_thread::sleep_for(std::chrono::milliseconds(600));
    busy = noise_between(before, cpu_sample(), queue, run_queue_sample());
  }
  CAPTURE(own.cpu_share.value_or(-1), busy.cpu_share.value_or(-1), own.cpu_ticks, busy.cpu_ticks);
  // 600 ms over the machine's cores is at least 100 ticks of 10 ms: the share is stated.
  REQUIRE(own.cpu_share);
  REQUIRE(busy.cpu_share);
  CHECK(*busy.cpu_share >= 0.0);
  CHECK(*busy.cpu_share <= 1.0);
  // One spinning child on n cores is about 1/n of the machine; allow for a loaded host.
  CHECK(*busy.cpu_share > 0.5 / static_cast<double>(machine_info().cores));
  CHECK(*own.cpu_share >= 0.0);  // our own loop is subtracted; other tests may run beside us
  CHECK(*own.cpu_share <= 1.0);
  CHECK(busy.loadavg >= 0.0);
}

TEST_CASE("too short an interval for /proc/stat's ticks states no CPU share", "[machine]") {
  const CpuSample before = cpu_sample();
  const RunQueueSample queue = run_queue_sample();
  const Noise n = noise_between(before, cpu_sample(), queue, run_queue_sample());
  CHECK(n.cpu_ticks < kMinNoiseTicks);
  CHECK_FALSE(n.cpu_share);
}

TEST_CASE("the run-queue sample covers this process's threads", "[machine]") {
  const RunQueueSample s = run_queue_sample();
  if (!s.available) {
    WARN("this kernel keeps no schedstat: run-queue wait is recorded as NULL");
    return;
  }
  CHECK(s.wait_ns.count(static_cast<int>(::getpid())) == 1);  // the main thread's id is the pid
  std::thread other([] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  const RunQueueSample with_thread = run_queue_sample();
  other.join();
  CHECK(with_thread.wait_ns.size() >= s.wait_ns.size() + 1);
}

// Real contention, run alone by ci/test.sh's contention step.
TEST_CASE("a process spinning on our core shows as run-queue wait of our thread", "[.][contention]") {
  kvtest::PinnedThread pin(0);
  REQUIRE(pin.pinned);
  const auto spin_for = [](std::chrono::milliseconds cpu) {
    const auto until = std::chrono::steady_clock::now() + cpu;
    volatile double sink = 0.0;
    while (std::chrono::steady_clock::now() < until) sink = sink + 1.0;
  };
  RunQueueSample before = run_queue_sample();
  if (!before.available) {
    WARN("this kernel keeps no schedstat");
    return;
  }
  spin_for(std::chrono::milliseconds(300));
  const Noise alone = noise_between(cpu_sample(), cpu_sample(), before, run_queue_sample());
  Noise shared;
  {
    kvtest::BusyCore busy(0, 60);
    before = run_queue_sample();
    spin_for(std::chrono::milliseconds(600));
    shared = noise_between(cpu_sample(), cpu_sample(), before, run_queue_sample());
  }
  REQUIRE(alone.run_queue_share);
  REQUIRE(shared.run_queue_share);
  CAPTURE(*alone.run_queue_share, *shared.run_queue_share, *shared.run_queue_ms);
  // Two runnable tasks on one core: ours waits about half the time.
  CHECK(*shared.run_queue_share > 0.25);
  CHECK(*shared.run_queue_share > *alone.run_queue_share + 0.15);
}
