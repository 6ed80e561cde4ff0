#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
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

TEST_CASE("the CPU is named from /proc/cpuinfo on x86 and on Arm, big.LITTLE cores each once", "[machine]") {
  CHECK(cpu_model_from_cpuinfo("processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\nflags\t: fpu avx2\n") ==
        "Intel(R) Xeon(R) Platinum 8480+");
  // A Raspberry Pi 5: four Cortex-A76; its 64-bit kernel lists no "model name".
  std::string pi5;
  for (int cpu = 0; cpu < 4; ++cpu) {
    pi5 += "processor\t: " + std::to_string(cpu) + "\nBogoMIPS\t: 108.00\nFeatures\t: fp asimd asimddp\nCPU implementer\t: 0x41\n"
           "CPU architecture: 8\nCPU variant\t: 0x4\nCPU part\t: 0xd0b\nCPU revision\t: 1\n\n";
  }
  CHECK(cpu_model_from_cpuinfo(pi5 + "Revision\t: d04170\nModel\t\t: Raspberry Pi 5 Model B Rev 1.0\n") == "Arm Cortex-A76");
  // A phone: little cores, then big ones, then a core of a part kvbench has no name for.
  const std::string phone = "processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd05\n\nprocessor\t: 1\nCPU implementer\t: 0x41\nCPU part\t: 0xd05\n\n"
                            "processor\t: 2\nCPU implementer\t: 0x41\nCPU part\t: 0xd41\n\nprocessor\t: 3\nCPU implementer\t: 0x51\nCPU part\t: 0x001\n";
  CHECK(cpu_model_from_cpuinfo(phone) == "Arm Cortex-A55 + Cortex-A78 + implementer 0x51 part 0x001");
  CHECK(cpu_model_from_cpuinfo("processor\t: 0\n").empty());
}

TEST_CASE("the board is the device tree's model, else DMI's vendor and product, else nothing", "[machine]") {
  const kvtest::TempDir temp("kvbench-machine-board");
  const auto put = [&](const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(temp.path + path).parent_path());
    std::ofstream(temp.path + path, std::ios::binary) << text;
  };
  CHECK(board_name(temp.path).empty());
  put("/class/dmi/id/sys_vendor", "QEMU\n");
  CHECK(board_name(temp.path) == "QEMU");
  put("/class/dmi/id/product_name", "Standard PC (Q35 + ICH9, 2009)\n");
  CHECK(board_name(temp.path) == "QEMU Standard PC (Q35 + ICH9, 2009)");
  put("/class/dmi/id/sys_vendor", "Dell Inc.\n");
  put("/class/dmi/id/product_name", "Dell Inc. PowerEdge R760\n");
  CHECK(board_name(temp.path) == "Dell Inc. PowerEdge R760");  // the vendor once
  put("/firmware/devicetree/base/model", std::string("Raspberry Pi 5 Model B Rev 1.0") + '\0');
  CHECK(board_name(temp.path) == "Raspberry Pi 5 Model B Rev 1.0");
}
