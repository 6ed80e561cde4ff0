#include "test_support.h"

#include <cstdlib>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <sstream>

namespace kvtest {

std::vector<kv::Isa> tested_isas() {
  const std::vector<kv::Isa> supported = kv::supported_isas();
  const char* named = std::getenv("KVBENCH_TEST_ISAS");
  if (named == nullptr || *named == '\0') return supported;
  std::vector<kv::Isa> tested;
  std::stringstream list(named);
  for (std::string name; std::getline(list, name, ',');) {
    const kv::Isa isa = kv::parse_isa(name, "KVBENCH_TEST_ISAS");
    if (std::find(supported.begin(), supported.end(), isa) == supported.end()) {
      throw std::runtime_error("KVBENCH_TEST_ISAS names " + name + ", a path this CPU does not offer");
    }
    tested.push_back(isa);
  }
  return tested;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

int run_unprivileged(const std::function<int()>& body) {
  const pid_t child = ::fork();
  if (child < 0) return 255;
  if (child == 0) {
    if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(255);
    int code = 255;
    try {
      code = body();
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

std::vector<float> random_values(std::size_t count, std::uint32_t seed, float stddev) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, stddev);
  std::vector<float> values(count);
  for (float& v : values) v = normal(rng);
  return values;
}

std::vector<float> random_keys(int tokens, int heads, int dim, std::uint32_t seed) {
  std::vector<float> keys = random_values(static_cast<std::size_t>(tokens) * heads * dim, seed);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto channel = static_cast<int>(i % static_cast<std::size_t>(dim));
    if (channel % 4 == 1) keys[i] = 6.0f + 0.5f * keys[i];  // outlier channel away from 0
  }
  return keys;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float diff = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(a[i] - b[i]));
  return diff;
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

float relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  float scale = 0.0f;
  for (float x : b) scale = std::max(scale, std::fabs(x));
  return max_abs_diff(a, b) / std::max(scale, 1e-30f);
}

std::string model_file(const std::string& name) {
  const std::string path = std::string(KVBENCH_MODELS_DIR) + "/" + name;
  if (!std::filesystem::exists(path)) {
    throw std::runtime_error("test model missing: " + path + " (configure with -DKVBENCH_MODELS_DIR=...)");
  }
  return path;
}

std::string temp_path(const std::string& stem) {
  static int counter = 0;
  return (std::filesystem::temp_directory_path() /
          (stem + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++))).string();
}

TempDir::TempDir(const std::string& stem) : path(temp_path(stem)) { std::filesystem::create_directories(path); }

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

ScopedEnv::ScopedEnv(const std::string& n, const std::string& value) : name(n) {
  if (const char* old = std::getenv(name.c_str())) {
    was_set = true;
    saved = old;
  }
  ::setenv(name.c_str(), value.c_str(), 1);
}

ScopedEnv::~ScopedEnv() {
  if (was_set) {
    ::setenv(name.c_str(), saved.c_str(), 1);
  } else {
    ::unsetenv(name.c_str());
  }
}

BusyCore::BusyCore(int cpu, int max_seconds) {
  pid = ::fork();
  if (pid != 0) return;
  // The child: pinned where asked, bounded by an alarm, spinning on nothing but the CPU.
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    ::sched_setaffinity(0, sizeof(set), &set);
  }
  ::alarm(static_cast<unsigned>(max_seconds));
  volatile unsigned long spin = 0;
  for (;;) spin = spin + 1;
}

BusyCore::~BusyCore() {
  if (pid <= 0) return;
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

PinnedThread::PinnedThread(int cpu) {
  cpu_set_t old;
  CPU_ZERO(&old);
  if (::sched_getaffinity(0, sizeof(old), &old) != 0) return;
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &old)) previous.push_back(i);
  }
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pinned = ::sched_setaffinity(0, sizeof(set), &set) == 0;
}

PinnedThread::~PinnedThread() {
  if (!pinned) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int i : previous) CPU_SET(i, &set);
  ::sched_setaffinity(0, sizeof(set), &set);
}

}  // namespace kvtest
