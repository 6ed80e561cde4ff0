// The conditions a repetition ran under on its device: the clock of the cores the engine ran on
// (cpufreq), the hottest thermal zone and the kernel's throttling count, read from sysfs before
// and after the script. Phones and boards slow down when hot; a figure measured on a throttled
// core is not comparable with one measured cool, so each repetition says which it was.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kvbench {

struct DeviceSample {
  // The highest current frequency among the cores the engine may run on (scaling_cur_freq),
  // MHz: the cores it keeps busy run at the top clock the device allows, idle ones below it.
  std::optional<double> freq_mhz;
  // Their governors (scaling_governor): one name, or the distinct names joined by '/'.
  std::string governor;
  // The hottest thermal zone (thermal_zone*/temp), degrees Celsius.
  std::optional<double> hottest_c;
  // Throttling the kernel counted on those cores so far (thermal_throttle/*_throttle_count).
  std::optional<std::uint64_t> throttle_count;
  // Why a field is missing: what this machine's sysfs does not expose.
  std::string no_freq, no_thermal, no_throttle;
};

// Reads `root` (normally /sys) for the CPUs in `cpus`.
DeviceSample sample_device(const std::string& root, const std::vector<int>& cpus);

// The first line of a sysfs or device-tree file, up to a NUL (device-tree strings end in one), without
// trailing blanks; nullopt when the file cannot be read.
std::optional<std::string> read_sysfs_line(const std::string& path);

// The sysfs root: $KVBENCH_SYSFS_ROOT when set (tests build a fake tree), else /sys.
std::string sysfs_root();
// The CPUs this process may run on (its affinity mask): the engine's cores.
std::vector<int> engine_cpus();

// A repetition's conditions from its two samples.
struct DeviceConditions {
  DeviceSample start, end;
  // The frequency fell by more than kFreqDropShare between start and end, or the kernel
  // counted throttling in between: the repetition is flagged like a noisy one.
  bool freq_dropped() const;
  std::optional<std::uint64_t> throttle_events() const;
  bool slowed() const { return freq_dropped() || throttle_events().value_or(0) > 0; }
};
inline constexpr double kFreqDropShare = 0.10;

// Waiting for a device to cool before a repetition (the suite's device.max_start_temp_c):
// polls the hottest zone every poll_s until it is below max_c or timeout_s of polling passed.
struct CoolWait {
  double waited_s = 0.0;             // the polls' sleeps
  std::optional<double> hottest_c;   // at the last poll
  bool timed_out = false;            // still at or above max_c: the repetition starts hot
};
CoolWait wait_until_cool(double max_c, double timeout_s, const std::function<std::optional<double>()>& hottest,
                         const std::function<void(double)>& sleep_s, double poll_s = 1.0);

}  // namespace kvbench
