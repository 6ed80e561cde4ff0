// A run on a device that is hot or exposes no sensors, with a sysfs tree the test builds
// (KVBENCH_SYSFS_ROOT): the wait times out with a message and flags the repetition, the figures
// say what they read, and a suite that waits for a temperature without a sensor is refused.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>

#include "e2e_support.h"
#include "test_support.h"

using namespace kvtest;
namespace fs = std::filesystem;

namespace {

// The tree a run reads instead of /sys while the object lives.
struct FakeSysfs {
  explicit FakeSysfs(const std::string& root) { ::setenv("KVBENCH_SYSFS_ROOT", root.c_str(), 1); }
  ~FakeSysfs() { ::unsetenv("KVBENCH_SYSFS_ROOT"); }
  FakeSysfs(const FakeSysfs&) = delete;
  FakeSysfs& operator=(const FakeSysfs&) = delete;
};

void write_sysfs(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  write_file(path, text);
}

std::string suite(const std::string& device) {
  return R"({"name": "device", "repetitions": 1, "warmup": 0, "device": )" + device + R"(,
    "models": [{"name": "m", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "w", "kind": "rag", "context_tokens": 512, "gen_tokens": 4}],
    "policies": [{"name": "p", "k": "q4", "v": "q4", "sparse": {"selector": "hybrid", "budget": 0.5, "window": 64}}]})";
}

}  // namespace

TEST_CASE("a device that stays hot: the wait times out, the repetition runs flagged noisy with its temperatures", "[e2e]") {
  const kvtest::TempDir temp("kvbench-e2e-device");
  const std::string root = temp.path + "/sys";
  write_sysfs(root + "/class/thermal/thermal_zone0/temp", "80000\n");
  write_sysfs(root + "/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", "2400000\n");
  write_sysfs(root + "/devices/system/cpu/cpu0/cpufreq/scaling_governor", "schedutil\n");
  const std::string file = temp.path + "/suite.json", db = temp.path + "/r.sqlite";
  write_file(file, suite(R"({"max_start_temp_c": 45, "cool_timeout_s": 0.3})"));
  const FakeSysfs fake(root);
  const Output out = run_kvbench("run --suite " + file + " --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK_THAT(out.text, Catch::Contains("waits for the device to cool below 45 C"));
  CHECK_THAT(out.text, Catch::Contains("the hottest thermal zone is still 80.0 C after waiting 0 s (device.max_start_temp_c 45 C)"));
  CHECK(scalar(db, "SELECT value FROM metrics WHERE name = 'device_temp_c_start'") == "80.0");
  CHECK(scalar(db, "SELECT noisy FROM metrics WHERE name = 'tpot_ms_p50' AND clock = 'host'") == "1");
  CHECK_THAT(scalar(db, "SELECT na_reason FROM metrics WHERE name = 'device_throttle_events'"), Catch::Contains("no throttling count"));
  CHECK_THAT(scalar(db, "SELECT meta_json FROM runs"), Catch::Contains("\"cpu_governor\":\"schedutil\""));
}

TEST_CASE("a suite that waits for a temperature on a machine without a thermal zone is refused before any work", "[e2e]") {
  const kvtest::TempDir temp("kvbench-e2e-device-none");
  fs::create_directories(temp.path + "/sys");
  const std::string file = temp.path + "/suite.json", db = temp.path + "/r.sqlite";
  write_file(file, suite(R"({"max_start_temp_c": 45})"));
  const FakeSysfs fake(temp.path + "/sys");
  const Output out = run_kvbench("run --suite " + file + " --db " + db);
  CHECK(out.status == 2);
  CHECK_THAT(out.text, Catch::Contains(file) && Catch::Contains("/device/max_start_temp_c") && Catch::Contains("no thermal zone"));
  CHECK_FALSE(fs::exists(db));
}
