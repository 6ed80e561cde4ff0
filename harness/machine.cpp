#include "machine.h"

#include <dirent.h>
#include <malloc.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "device_conditions.h"
#include "runtime/clock.h"

namespace kvbench {

namespace {

// The value of the first `key: value` or `key=value` line of `text`, quotes dropped.
std::string first_value(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const auto colon = line.find_first_of(":=");
    if (colon == std::string::npos) continue;
    std::string value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t\""));
    while (!value.empty() && (value.back() == '"' || value.back() == ' ')) value.pop_back();
    return value;
  }
  return "";
}

std::string read_text(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string sysfs_string(const std::string& file) { return read_sysfs_line(file).value_or(""); }

// Arm's own cores by "CPU part" (implementer 0x41); the cores of the boards and phones kvbench
// has profiles for, and the Neoverse server cores.
const char* arm_part_name(unsigned part) {
  switch (part) {
    case 0xd03: return "Cortex-A53";
    case 0xd04: return "Cortex-A35";
    case 0xd05: return "Cortex-A55";
    case 0xd07: return "Cortex-A57";
    case 0xd08: return "Cortex-A72";
    case 0xd09: return "Cortex-A73";
    case 0xd0a: return "Cortex-A75";
    case 0xd0b: return "Cortex-A76";
    case 0xd0c: return "Neoverse-N1";
    case 0xd0d: return "Cortex-A77";
    case 0xd40: return "Neoverse-V1";
    case 0xd41: return "Cortex-A78";
    case 0xd44: return "Cortex-X1";
    case 0xd46: return "Cortex-A510";
    case 0xd47: return "Cortex-A710";
    case 0xd48: return "Cortex-X2";
    case 0xd49: return "Neoverse-N2";
    case 0xd4d: return "Cortex-A715";
    case 0xd4e: return "Cortex-X3";
    case 0xd4f: return "Neoverse-V2";
    case 0xd80: return "Cortex-A520";
    case 0xd81: return "Cortex-A720";
    case 0xd82: return "Cortex-X4";
    default: return nullptr;
  }
}

}  // namespace

std::string cpu_model_from_cpuinfo(const std::string& cpuinfo) {
  std::istringstream lines(cpuinfo);
  std::vector<std::string> kinds;
  std::string implementer;
  for (std::string line; std::getline(lines, line);) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string key = line.substr(0, colon), value = line.substr(colon + 1);
    key.erase(key.find_last_not_of(" \t") + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    if (key == "model name" && !value.empty()) return value;
    if (key == "CPU implementer") implementer = value;
    if (key != "CPU part") continue;
    const unsigned part = static_cast<unsigned>(std::strtoul(value.c_str(), nullptr, 0));
    const char* known = implementer == "0x41" ? arm_part_name(part) : nullptr;
    const std::string kind = known != nullptr ? known : "implementer " + implementer + " part " + value;
    if (std::find(kinds.begin(), kinds.end(), kind) == kinds.end()) kinds.push_back(kind);
  }
  std::string named;
  for (const std::string& kind : kinds) named += (named.empty() ? "Arm " : " + ") + kind;
  return named;
}

std::string board_name(const std::string& root) {
  if (std::string model = sysfs_string(root + "/firmware/devicetree/base/model"); !model.empty()) return model;
  const std::string vendor = sysfs_string(root + "/class/dmi/id/sys_vendor");
  const std::string product = sysfs_string(root + "/class/dmi/id/product_name");
  if (product.empty()) return vendor;
  return vendor.empty() || product.rfind(vendor, 0) == 0 ? product : vendor + " " + product;
}

std::string MachineInfo::to_json() const {
  nlohmann::json j = {{"cpu_model", cpu_model}, {"cpu_flags", cpu_flags}, {"cores", cores}, {"memory_bytes", memory_bytes},
                      {"os", os},               {"kernel", kernel},       {"compiler", compiler}};
  if (!cpu_governor.empty()) j["cpu_governor"] = cpu_governor;
  if (!board.empty()) j["board"] = board;
  return j.dump();
}

MachineInfo machine_info() {
  MachineInfo m;
  const std::string cpuinfo = read_text("/proc/cpuinfo");
  m.cpu_model = cpu_model_from_cpuinfo(cpuinfo);
  m.board = board_name(sysfs_root());
  m.cpu_governor = sample_device(sysfs_root(), engine_cpus()).governor;
  // x86 lists "flags", aarch64 "Features" (asimd: NEON, asimddp: dotprod, i8mm, asimdhp: fp16 arithmetic).
  std::string listed = first_value(cpuinfo, "flags");
  if (listed.empty()) listed = first_value(cpuinfo, "Features");
  std::istringstream flags(listed);
  const std::set<std::string> wanted = {"avx2",    "fma",         "f16c",  "avx512f", "avx512bw", "avx512vl",
                                        "avx512dq", "avx512_vnni", "asimd", "asimddp", "i8mm",     "asimdhp"};
  for (std::string flag; flags >> flag;) {
    if (wanted.count(flag) != 0) m.cpu_flags += (m.cpu_flags.empty() ? "" : " ") + flag;
  }
  m.cores = static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN));
  m.memory_bytes = static_cast<std::uint64_t>(::sysconf(_SC_PHYS_PAGES)) * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  m.os = first_value(read_text("/etc/os-release"), "PRETTY_NAME");
  utsname names{};
  if (::uname(&names) == 0) m.kernel = names.release;
#if defined(__clang__)
  m.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
  m.compiler = "g++ " __VERSION__;
#endif
#ifdef KVBENCH_CXX_FLAGS
  m.compiler += std::string(" ") + KVBENCH_CXX_FLAGS;
#endif
  return m;
}

CpuSample cpu_sample() {
  CpuSample s;
  {
    std::ifstream stat("/proc/stat");
    std::string cpu;
    std::uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq >> steal;
    s.busy = user + nice + system + irq + softirq + steal;
    s.total = s.busy + idle + iowait;
  }
  {
    std::ifstream self("/proc/self/stat");
    std::string text((std::istreambuf_iterator<char>(self)), std::istreambuf_iterator<char>());
    // Fields after the command (which may hold spaces) start past the last ')'.
    std::istringstream fields(text.substr(text.rfind(')') + 2));
    std::string field;
    std::uint64_t utime = 0, stime = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i) {
      if (i == 14) utime = std::stoull(field);
      if (i == 15) stime = std::stoull(field);
    }
    s.self = utime + stime;
  }
  return s;
}

RunQueueSample run_queue_sample() {
  RunQueueSample s;
  s.at_ns = kv::monotonic_ns();
  DIR* dir = ::opendir("/proc/self/task");
  if (dir == nullptr) return s;
  while (const dirent* entry = ::readdir(dir)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::ifstream in(std::string("/proc/self/task/") + entry->d_name + "/schedstat");
    std::uint64_t on_cpu = 0, waiting = 0;
    if (!(in >> on_cpu >> waiting)) continue;  // the thread exited meanwhile, or no schedstat
    s.wait_ns[std::atoi(entry->d_name)] = waiting;
    s.available = true;
  }
  ::closedir(dir);
  return s;
}

Noise noise_between(const CpuSample& before, const CpuSample& after, const RunQueueSample& queue_before,
                    const RunQueueSample& queue_after) {
  Noise n;
  n.cpu_ticks = after.total - before.total;
  const double total = static_cast<double>(n.cpu_ticks);
  const double others = static_cast<double>(after.busy - before.busy) - static_cast<double>(after.self - before.self);
  if (n.cpu_ticks >= kMinNoiseTicks) n.cpu_share = std::clamp(others / total, 0.0, 1.0);
  double load[1] = {0.0};
  if (::getloadavg(load, 1) == 1) n.loadavg = load[0];
  if (queue_before.available && queue_after.available) {
    std::uint64_t waited = 0;
    for (const auto& [tid, ns] : queue_after.wait_ns) {
      const auto it = queue_before.wait_ns.find(tid);
      const std::uint64_t from = it == queue_before.wait_ns.end() ? 0 : it->second;
      waited += ns >= from ? ns - from : 0;  // a reused thread id starts again from 0
    }
    const double wall_ms = static_cast<double>(queue_after.at_ns - queue_before.at_ns) * 1e-6;
    n.run_queue_ms = static_cast<double>(waited) * 1e-6;
    n.run_queue_share = wall_ms > 0.0 ? *n.run_queue_ms / wall_ms : 0.0;
  }
  return n;
}

std::uint64_t peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;  // kB
  }
  return 0;
}

bool reset_peak_rss() {
  // Heap the allocator still holds from earlier work would set the floor of the next peak, and
  // how much it holds differs from process to process: hand it back first, so that the peak
  // is what the next repetition itself used.
  ::malloc_trim(0);
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

std::uint64_t l2_cache_bytes() {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index2/size");
  std::string size;
  if (!(in >> size) || size.empty()) return 0;
  std::uint64_t bytes = std::strtoull(size.c_str(), nullptr, 10);
  if (size.back() == 'K') bytes <<= 10;
  if (size.back() == 'M') bytes <<= 20;
  return bytes;
}

}  // namespace kvbench
