// Device conditions from a sysfs tree the test builds: every field read where the files exist,
// NULL with the missing path named where they do not.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "case_metrics.h"
#include "device_conditions.h"
#include "test_support.h"

using namespace kvbench;
namespace fs = std::filesystem;

namespace {

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text << "\n";
}

// Two cores at 2.4 (busy) and 1.8 GHz (idle) (schedutil, performance), two zones at 41.5 and
// 63 C, x86 throttle counters.
void board(const fs::path& root, int core0_khz = 2400000, int hot_milli = 63000, int throttled = 3) {
  const fs::path cpu = root / "devices/system/cpu";
  write(cpu / "cpu0/cpufreq/scaling_cur_freq", std::to_string(core0_khz));
  write(cpu / "cpu0/cpufreq/scaling_governor", "schedutil");
  write(cpu / "cpu1/cpufreq/scaling_cur_freq", "1800000");
  write(cpu / "cpu1/cpufreq/scaling_governor", "performance");
  write(cpu / "cpu0/thermal_throttle/core_throttle_count", "1");
  write(cpu / "cpu1/thermal_throttle/core_throttle_count", std::to_string(throttled - 1));
  write(root / "class/thermal/thermal_zone0/temp", "41500");
  write(root / "class/thermal/thermal_zone1/temp", std::to_string(hot_milli));
  write(root / "class/thermal/cooling_device0/cur_state", "0");  // not a zone
}

}  // namespace

TEST_CASE("a device sample reads the engine cores' clock and governor, the hottest zone and throttling", "[device]") {
  kvtest::TempDir dir("sysfs");
  board(dir.path);
  const DeviceSample s = sample_device(dir.path, {0, 1});
  REQUIRE(s.freq_mhz);
  CHECK(*s.freq_mhz == 2400.0);  // the busy core: an idle one's low clock says nothing
  CHECK(s.governor == "performance/schedutil");
  REQUIRE(s.hottest_c);
  CHECK(*s.hottest_c == 63.0);
  REQUIRE(s.throttle_count);
  CHECK(*s.throttle_count == 3);
  CHECK(s.no_freq.empty());
  // Only the cores the engine runs on count.
  const DeviceSample core1 = sample_device(dir.path, {1});
  CHECK(*core1.freq_mhz == 1800.0);
  CHECK(core1.governor == "performance");
}

TEST_CASE("a board that exposes nothing gives no figures and names what is missing", "[device]") {
  kvtest::TempDir dir("sysfs-empty");
  const DeviceSample s = sample_device(dir.path, {0, 1});
  CHECK_FALSE(s.freq_mhz);
  CHECK_FALSE(s.hottest_c);
  CHECK_FALSE(s.throttle_count);
  CHECK(s.governor.empty());
  CHECK_THAT(s.no_freq, Catch::Contains("no CPU frequency") && Catch::Contains("cpufreq/scaling_cur_freq"));
  CHECK_THAT(s.no_thermal, Catch::Contains("no thermal zone") && Catch::Contains("thermal_zone*/temp"));
  CHECK_THAT(s.no_throttle, Catch::Contains("no throttling count"));
  // An unreadable value is missing, not zero.
  write(fs::path(dir.path) / "class/thermal/thermal_zone0/temp", "n/a");
  CHECK_FALSE(sample_device(dir.path, {0}).hottest_c);
}

TEST_CASE("a repetition whose cores slowed down or were throttled is flagged", "[device]") {
  kvtest::TempDir dir("sysfs-slow");
  DeviceConditions d;
  board(dir.path, 2400000, 50000, 3);
  d.start = sample_device(dir.path, {0, 1});
  board(dir.path, 2200000, 70000, 3);  // 8.3% slower, no throttling
  d.end = sample_device(dir.path, {0, 1});
  CHECK_FALSE(d.freq_dropped());
  CHECK(d.throttle_events() == 0u);
  CHECK_FALSE(d.slowed());
  board(dir.path, 2000000, 70000, 3);  // 16.7% slower
  d.end = sample_device(dir.path, {0, 1});
  CHECK(d.freq_dropped());
  CHECK(d.slowed());
  board(dir.path, 2400000, 70000, 5);  // the same clock, two throttling events
  d.end = sample_device(dir.path, {0, 1});
  CHECK(d.throttle_events() == 2u);
  CHECK(d.slowed());
  // Without counters on either side there is no figure, and nothing is flagged for it.
  d.end.throttle_count.reset();
  CHECK_FALSE(d.throttle_events());
  CHECK_FALSE(d.slowed());
}

TEST_CASE("the wait for a cool device polls until the hottest zone is below the limit, or gives up at the timeout", "[device]") {
  std::vector<std::optional<double>> readings{70.0, 60.0, 44.5};
  std::size_t next = 0;
  double slept = 0.0;
  const auto hottest = [&]() { return readings[std::min(next++, readings.size() - 1)]; };
  const auto sleep = [&](double s) { slept += s; };
  CoolWait w = wait_until_cool(45.0, 10.0, hottest, sleep);
  CHECK_FALSE(w.timed_out);
  CHECK(w.waited_s == 2.0);  // two polls of a second
  CHECK(slept == 2.0);
  CHECK(*w.hottest_c == 44.5);
  // Never cool enough: the last sleep is cut to the timeout.
  readings = {80.0};
  next = 0;
  w = wait_until_cool(45.0, 2.5, hottest, sleep);
  CHECK(w.timed_out);
  CHECK(w.waited_s == 2.5);
  CHECK(*w.hottest_c == 80.0);
  // A zone that stops answering ends the wait: there is nothing left to wait for.
  readings = {std::nullopt};
  next = 0;
  w = wait_until_cool(45.0, 100.0, hottest, sleep);
  CHECK_FALSE(w.timed_out);
  CHECK(w.waited_s == 0.0);
}
