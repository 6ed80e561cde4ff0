// Helpers shared by the tests: seeded random data with the shapes of real K/V.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "runtime/isa.h"

namespace kvtest {

// The kernel paths a test compares with its reference: every path the CPU offers, or only
// those named in KVBENCH_TEST_ISAS (comma-separated; a name the CPU does not offer fails the
// test). ci/test.sh runs every path under the fullest qemu CPU model and, under the models that
// lack an extension, only the paths that must run without it: what those models add is the
// proof that a path uses no instruction it may not.
std::vector<kv::Isa> tested_isas();

// Normal values; with `offset_channels`, every 4th channel is shifted and scaled the way
// post-RoPE key outlier channels are (a range that does not contain 0).
std::vector<float> random_values(std::size_t count, std::uint32_t seed, float stddev = 1.0f);
std::vector<float> random_keys(int tokens, int heads, int dim, std::uint32_t seed);

// max |a - b|, and max |a - b| / max(|b|)
float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);
float relative_error(const std::vector<float>& a, const std::vector<float>& b);
// Same length and the same bits.
bool bit_identical(const std::vector<float>& a, const std::vector<float>& b);

// The lines of a text, without their newlines.
std::vector<std::string> lines_of(const std::string& text);

// A file of models/ (KVBENCH_MODELS_DIR at configure time); fails the test when it
// does not exist.
std::string model_file(const std::string& name);
// A fresh temporary file path for the test to write (removed by the caller).
std::string temp_path(const std::string& stem);

// The whole content of a file ("" when it cannot be read): compare it before and after to show
// that something left a file untouched.
std::string file_bytes(const std::string& path);

// Runs `body` in a forked child without root's privileges (uid and gid 65534 when the test runs
// as root, so permission bits apply); returns its exit status, 255 when it threw or could not
// drop privileges. Files the child reads must be readable by "other".
int run_unprivileged(const std::function<int()>& body);

// A fresh temporary directory, removed with everything in it when the object dies.
struct TempDir {
  explicit TempDir(const std::string& stem);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;
};

// Sets an environment variable for the object's life and restores it (or its absence) after,
// even when the test fails in between.
struct ScopedEnv {
  ScopedEnv(const std::string& name, const std::string& value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  std::string name, saved;
  bool was_set = false;
};

// Real contention: a child process that spins on one core (`cpu`, or wherever the scheduler
// puts it when -1) for at most `max_seconds` (it exits by itself even if this process dies),
// killed when the object dies.
struct BusyCore {
  explicit BusyCore(int cpu = -1, int max_seconds = 120);
  ~BusyCore();
  BusyCore(const BusyCore&) = delete;
  BusyCore& operator=(const BusyCore&) = delete;
  int pid = -1;
};

// Pins the calling thread to one core for the object's life (restores the previous mask).
struct PinnedThread {
  explicit PinnedThread(int cpu);
  ~PinnedThread();
  PinnedThread(const PinnedThread&) = delete;
  PinnedThread& operator=(const PinnedThread&) = delete;
  bool pinned = false;
  std::vector<int> previous;
};

}  // namespace kvtest
