// Whether a policy's tier sizes fit the memory they stand for: an L0 arena or an L1 cap (both
// whole-model bytes) larger than the DRAM of the machine or SoC a case is priced for describes a
// device that does not exist, and a run would quietly treat it as "uncapped". Refused before the
// run is stored, naming the field, the size and the limit.
#pragma once

#include <cstdint>
#include <vector>

#include "case_group_run.h"
#include "case_preparation.h"
#include "suite_config.h"

namespace kvbench {

// This machine's physical memory (sysconf pages x page size).
std::uint64_t host_physical_memory();

// Throws InputError(suite file, "<policy>/memory/<field>") for the first case whose l0_bytes or
// l1_bytes exceeds the memory of a SoC of the suite: the host's physical memory for "host" (or,
// when --soc prices the host as a device, that device's), a profile's installed DRAM otherwise.
void check_memory_caps(const SuiteConfig& suite, const std::vector<PreparedCase>& cases, const SocProfiles& profiles,
                       bool host_priced_as_device);

}  // namespace kvbench
