// The suites compiled into the binary (configs/suites/*.json at build time).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace kvbench {

// (name, JSON) of every built-in suite: smoke, nightly, accuracy, soc-reference.
const std::vector<std::pair<std::string, std::string>>& builtin_suites();

}  // namespace kvbench
