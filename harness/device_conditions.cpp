#include "device_conditions.h"

#include <sched.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

namespace kvbench {

namespace {

namespace fs = std::filesystem;

std::optional<double> read_number(const fs::path& path) {
  const std::optional<std::string> line = read_sysfs_line(path);
  if (!line || line->empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(line->c_str(), &end);
  if (end == line->c_str() || *end != '\0') return std::nullopt;
  return value;
}

void read_frequency(const fs::path& cpu_dir, const std::vector<int>& cpus, DeviceSample& s) {
  std::set<std::string> governors;
  for (int cpu : cpus) {
    const fs::path freq = cpu_dir / ("cpu" + std::to_string(cpu)) / "cpufreq";
    if (const std::optional<double> khz = read_number(freq / "scaling_cur_freq")) {
      s.freq_mhz = std::max(s.freq_mhz.value_or(*khz / 1000.0), *khz / 1000.0);
    }
    if (const std::optional<std::string> governor = read_sysfs_line(freq / "scaling_governor")) governors.insert(*governor);
  }
  for (const std::string& g : governors) s.governor += (s.governor.empty() ? "" : "/") + g;
  if (!s.freq_mhz) s.no_freq = "this machine exposes no CPU frequency (" + (cpu_dir / "cpuN/cpufreq/scaling_cur_freq").string() + ")";
}

void read_thermal(const fs::path& thermal_dir, DeviceSample& s) {
  std::error_code ec;
  for (const fs::directory_entry& zone : fs::directory_iterator(thermal_dir, ec)) {
    if (zone.path().filename().string().rfind("thermal_zone", 0) != 0) continue;
    // Millidegrees Celsius; a zone that cannot be read now (a sensor asleep) is skipped.
    if (const std::optional<double> milli = read_number(zone.path() / "temp")) {
      s.hottest_c = std::max(s.hottest_c.value_or(*milli / 1000.0), *milli / 1000.0);
    }
  }
  if (!s.hottest_c) s.no_thermal = "this machine exposes no thermal zone (" + (thermal_dir / "thermal_zone*/temp").string() + ")";
}

void read_throttle(const fs::path& cpu_dir, const std::vector<int>& cpus, DeviceSample& s) {
  // x86 kernels count thermal throttling per core and package; other kernels do not say.
  for (int cpu : cpus) {
    const fs::path dir = cpu_dir / ("cpu" + std::to_string(cpu)) / "thermal_throttle";
    for (const char* name : {"core_throttle_count", "package_throttle_count"}) {
      if (const std::optional<double> count = read_number(dir / name)) {
        s.throttle_count = s.throttle_count.value_or(0) + static_cast<std::uint64_t>(*count);
      }
    }
  }
  if (!s.throttle_count) s.no_throttle = "this kernel reports no throttling count (" + (cpu_dir / "cpuN/thermal_throttle").string() + ")";
}

}  // namespace

std::optional<std::string> read_sysfs_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  line.resize(std::min(line.size(), line.find('\0')));
  while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
  return line;
}

DeviceSample sample_device(const std::string& root, const std::vector<int>& cpus) {
  DeviceSample s;
  const fs::path cpu_dir = fs::path(root) / "devices/system/cpu";
  read_frequency(cpu_dir, cpus, s);
  read_thermal(fs::path(root) / "class/thermal", s);
  read_throttle(cpu_dir, cpus, s);
  return s;
}

std::string sysfs_root() {
  const char* root = std::getenv("KVBENCH_SYSFS_ROOT");
  return root != nullptr && *root != '\0' ? root : "/sys";
}

std::vector<int> engine_cpus() {
  std::vector<int> cpus;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
    }
  }
  return cpus;
}

bool DeviceConditions::freq_dropped() const {
  return start.freq_mhz && end.freq_mhz && *end.freq_mhz < *start.freq_mhz * (1.0 - kFreqDropShare);
}

std::optional<std::uint64_t> DeviceConditions::throttle_events() const {
  if (!start.throttle_count || !end.throttle_count) return std::nullopt;
  return *end.throttle_count >= *start.throttle_count ? *end.throttle_count - *start.throttle_count : 0;
}

CoolWait wait_until_cool(double max_c, double timeout_s, const std::function<std::optional<double>()>& hottest,
                         const std::function<void(double)>& sleep_s, double poll_s) {
  CoolWait wait;
  for (;;) {
    wait.hottest_c = hottest();
    if (!wait.hottest_c || *wait.hottest_c < max_c) return wait;
    if (wait.waited_s >= timeout_s) {
      wait.timed_out = true;
      return wait;
    }
    const double step = std::min(poll_s, timeout_s - wait.waited_s);
    sleep_s(step);
    wait.waited_s += step;
  }
}

}  // namespace kvbench
