#include "memory_caps_check.h"

#include <fmt/format.h>
#include <unistd.h>

#include <string>

#include "human_units.h"
#include "runtime/error.h"

namespace kvbench {

std::uint64_t host_physical_memory() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) : 0;
}

void check_memory_caps(const SuiteConfig& suite, const std::vector<PreparedCase>& cases, const SocProfiles& profiles,
                       bool host_priced_as_device) {
  for (const std::string& soc : suite.socs) {
    const auto profile = profiles.find(soc);
    const bool measured_host = soc == "host" && !host_priced_as_device;
    double limit = 0.0;
    std::string what;
    if (measured_host) {
      limit = static_cast<double>(host_physical_memory());
      what = "this machine's physical memory";
    } else if (profile != profiles.end()) {
      limit = profile->second.memory_capacity_bytes.value;
      what = fmt::format("the installed DRAM of SoC '{}'", profile->second.name);
    }
    if (limit <= 0.0) continue;
    for (const PreparedCase& c : cases) {
      if (c.policy == nullptr) continue;
      const kv::MemoryConfig& m = c.policy->cache.memory;
      for (const auto& [field, bytes] : {std::pair<const char*, std::size_t>{"l1_bytes", m.l1_bytes}, {"l0_bytes", m.l0_bytes}}) {
        if (static_cast<double>(bytes) <= limit) continue;
        throw kv::InputError(suite.file, policy_path(suite, c) + "/memory/" + field,
                             fmt::format("{} ({} bytes) is more than {} ({}): a tier cannot be larger than the memory it is in "
                                         "(case {} on {}); give a size within it",
                                         human_bytes(static_cast<double>(bytes)), bytes, what, human_bytes(limit), c.info.name(), soc));
      }
    }
  }
}

}  // namespace kvbench
