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
  CHECK(sql_value(db, "SELECT value FROM metrics WHERE name = 'device_temp_c_start'") == "80.0");
  CHECK(sql_value(db, "SELECT noisy FROM metrics WHERE name = 'tpot_ms_p50' AND clock = 'host'") == "1");
  CHECK_THAT(sql_value(db, "SELECT na_reason FROM metrics WHERE name = 'device_throttle_events'"), Catch::Contains("no throttling count"));
  CHECK_THAT(sql_value(db, "SELECT meta_json FROM runs"), Catch::Contains("\"cpu_governor\":\"schedutil\""));
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

TEST_CASE("a board's run (--soc) merged home keeps its provenance and is set against its SoC's model and gates like a host run",
          "[e2e][merge]") {
  const kvtest::TempDir temp("kvbench-e2e-board");
  const std::string root = temp.path + "/sys";
  write_sysfs(root + "/firmware/devicetree/base/model", std::string("Raspberry Pi 5 Model B Rev 1.0") + '\0');
  const std::string file = temp.path + "/suite.json", home_file = temp.path + "/home.json", home = temp.path + "/home.sqlite";
  write_file(file, suite("{}"));
  // At home the same configuration is priced for the board's SoC beside the host.
  std::string home_suite = suite("{}");
  home_suite.insert(home_suite.rfind('}'), R"(, "socs": ["host", "raspberry-pi-5"])");
  write_file(home_file, home_suite);
  const auto ok = [](const std::string& args) {
    const Output out = run_kvbench(args);
    INFO(args << "\n" << out.text);
    REQUIRE(out.status == 0);
    return out.text;
  };
  ok("run --suite " + home_file + " --db " + home);
  const auto board_run = [&](const std::string& night) {
    const FakeSysfs fake(root);
    const std::string db = temp.path + "/board-" + night + ".sqlite";
    CHECK_THAT(ok("run --suite " + file + " --soc raspberry-pi-5 --shard 1/1 --run-group pi-" + night + " --db " + db),
               Catch::Contains("a device run: the host cases are this machine, priced with the raspberry-pi-5 profile"));
    ok("merge --into " + home + " " + db);
  };
  board_run("1");
  board_run("2");
  const std::string device_runs = "SELECT id FROM runs WHERE json_extract(meta_json, '$.device_soc') = 'raspberry-pi-5'";
  REQUIRE(sql_value(home, "SELECT count(*) FROM (" + device_runs + ")") == "2");
  const std::string first = sql_value(home, device_runs + " ORDER BY id LIMIT 1"), second = sql_value(home, device_runs + " ORDER BY id DESC LIMIT 1");
  CHECK(sql_value(home, "SELECT json_extract(meta_json, '$.board') FROM runs WHERE id = " + first) == "Raspberry Pi 5 Model B Rev 1.0");
  CHECK_FALSE(sql_value(home, "SELECT json_extract(meta_json, '$.cpu_model') FROM runs WHERE id = " + first).empty());
  CHECK(sql_value(home, "SELECT json_extract(meta_json, '$.board') FROM runs WHERE id = 1") != "Raspberry Pi 5 Model B Rev 1.0");
  // The board's measured case is priced with its SoC's profile: its modelled figures are the
  // home run's pricing of the same configuration on that SoC.
  const auto modelled = [&](const std::string& run, const std::string& soc) {
    return sql_value(home, "SELECT quote(m.value) FROM metrics m JOIN cases c ON c.id = m.case_id WHERE c.run_id = " + run +
                            " AND c.name LIKE '%/" + soc + "' AND m.name = 'tpot_ms_p50' AND m.clock = 'model'");
  };
  CHECK_FALSE(modelled("1", "raspberry-pi-5").empty());
  CHECK(modelled(first, "host") == modelled("1", "raspberry-pi-5"));
  CHECK(modelled("1", "host") != modelled("1", "raspberry-pi-5"));
  CHECK_THAT(sql_value(home, "SELECT tags FROM runs WHERE id = " + first), Catch::Contains("device=raspberry-pi-5"));
  const std::string validation = ok("validate-model --db " + home + " --run latest:device=raspberry-pi-5");
  CHECK_THAT(validation, Catch::Contains("run " + second + " (") && Catch::Contains("measured on Raspberry Pi 5 Model B Rev 1.0") &&
                             Catch::Contains("with the raspberry-pi-5 profile") && Catch::Contains("tpot_ms_p50"));
  // The home run's report sets the newest board run beside the SoC it prices.
  ok("report --db " + home + " --run 1 --out " + temp.path + "/report");
  const std::string page = kvtest::read_file(temp.path + "/report/index.html");
  CHECK_THAT(page, Catch::Contains("measured on a device: Raspberry Pi 5 Model B Rev 1.0 (run " + second));
  // Two board runs compare like two host runs: host-clock figures of one machine.
  const std::string compared = ok("compare --db " + home + " --baseline " + first + " --candidate " + second + " --format json");
  CHECK_THAT(compared, Catch::Contains("tpot_ms_p50") && !Catch::Contains("CPU '") && !Catch::Contains("board '"));
  // Another board with the same cores is another machine: its host timings are not gated against the first's.
  write_sysfs(root + "/firmware/devicetree/base/model", std::string("Radxa ROCK 5B") + '\0');
  board_run("3");
  const std::string third = sql_value(home, device_runs + " ORDER BY id DESC LIMIT 1");
  CHECK_THAT(ok("compare --db " + home + " --baseline " + first + " --candidate " + third + " --format json"),
             Catch::Contains("board 'Raspberry Pi 5 Model B Rev 1.0' vs 'Radxa ROCK 5B'"));
}

TEST_CASE("run --soc takes a built-in device profile and is checked before any work", "[e2e]") {
  const kvtest::TempDir temp("kvbench-e2e-board-bad");
  const std::string file = temp.path + "/suite.json", db = temp.path + "/r.sqlite";
  write_file(file, suite("{}"));
  for (const char* bad : {"host", "raspberry-pi-9"}) {
    const Output out = run_kvbench("run --suite " + file + " --soc " + std::string(bad) + " --db " + db);
    INFO(out.text);
    CHECK(out.status == 2);
    CHECK_THAT(out.text, Catch::Contains("--soc") && Catch::Contains(bad) && Catch::Contains("raspberry-pi-5"));
  }
  // A suite that prices SoCs only measures nothing this device could be.
  std::string priced_only = suite("{}");
  priced_only.insert(priced_only.rfind('}'), R"(, "socs": ["apple-m3"])");
  write_file(file, priced_only);
  const Output out = run_kvbench("run --suite " + file + " --soc raspberry-pi-5 --db " + db);
  CHECK(out.status == 2);
  CHECK_THAT(out.text, Catch::Contains("--soc") && Catch::Contains("no host among its socs"));
  CHECK_FALSE(fs::exists(db));
}
