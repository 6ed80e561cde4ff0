// The SoC profiles compiled into the binary (configs/socs/*.json at build time).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kvbench {

// (name, JSON) of every built-in profile, by name.
const std::vector<std::pair<std::string, std::string>>& builtin_socs();

}  // namespace kvbench
