// How kvbench runs callgrind for the sim clock: the options (collection only in the counted
// regions, simulated caches pinned to one documented geometry so that counts do not follow the
// CPU that runs them), the tool's version, and a child process that runs under it.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvbench::sim {

// The simulated caches, the same on every machine (callgrind would otherwise take the host's).
struct CacheGeometry {
  const char* name;  // callgrind's option: I1, D1, LL
  std::uint64_t bytes;
  int ways;
  int line_bytes;
  std::string option() const;  // "--I1=32768,8,64"
  std::string text() const;    // "32 KiB 8-way, 64-byte lines"
};
// A common x86-64 core's first level and a mid-size last level.
inline constexpr CacheGeometry kSimI1{"I1", 32768, 8, 64};
inline constexpr CacheGeometry kSimD1{"D1", 32768, 8, 64};
inline constexpr CacheGeometry kSimLL{"LL", 8u << 20, 16, 64};

// Valgrind's arguments before the program: callgrind, collection off but in the kvbench_sim_*
// regions, the pinned caches, names and positions uncompressed, the dump to `out_file`.
std::vector<std::string> callgrind_arguments(const std::string& out_file);

// `valgrind --version` of the valgrind on PATH ("valgrind-3.19.0"); nothing when there is none.
std::optional<std::string> valgrind_version();

// A child process: argv[0] found on PATH, run in `dir` with exactly `env`, its stdout and stderr
// to `log` (a file), its addresses not randomised. Polls `stop` (when given) and kills the child
// when it reads true.
struct ChildProcess {
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string dir;
  std::string log;
  const std::atomic<bool>* stop = nullptr;
  bool fixed_addresses = true;  // address-space randomisation off (personality ADDR_NO_RANDOMIZE)
};
struct ChildExit {
  int code = -1;    // exit status; -1 when it died of a signal
  int signal = 0;   // the signal that ended it, 0 if none
  bool stopped = false;  // killed because `stop` read true
};
// Throws std::runtime_error when the child cannot be started.
ChildExit run_child(const ChildProcess& child);

// The last `lines` lines of a file (a child's log for an error message).
std::string file_tail(const std::string& path, int lines);

}  // namespace kvbench::sim
