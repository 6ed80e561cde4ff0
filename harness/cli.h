// The kvbench command line: parses argv, runs the subcommand, and turns bad input into a
// clear message on stderr and a non-zero exit code.
#pragma once

#include <string>
#include <vector>

namespace kvbench {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRunFailed = 1;  // a run finished with failed cases
inline constexpr int kExitBadInput = 2;
inline constexpr int kExitInternal = 3;
// `run --fail-on-degraded`: every case finished, but the engine degraded in some (L2 faults, a
// full L2, danger, requantization, overflow); not one of the gate's 1, 4, 5, 6.
inline constexpr int kExitDegraded = 7;

int run_cli(int argc, char** argv);

// "kvbench 0.1.0 (git abc123, Release, GNU 12.2.0), kernels: avx2 (supported: scalar avx2)"
std::string version_text();

}  // namespace kvbench
