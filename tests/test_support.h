// Helpers shared by the tests: seeded random data with the shapes of real K/V.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace kvtest {

// Normal values; with `offset_channels`, every 4th channel is shifted and scaled the way
// post-RoPE key outlier channels are (a range that does not contain 0).
std::vector<float> random_values(std::size_t count, std::uint32_t seed, float stddev = 1.0f);
std::vector<float> random_keys(int tokens, int heads, int dim, std::uint32_t seed);

// max |a - b|, and max |a - b| / max(|b|)
float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);
float relative_error(const std::vector<float>& a, const std::vector<float>& b);

// A file of ../shared/models (KVBENCH_MODELS_DIR at configure time); fails the test when it
// does not exist.
std::string model_file(const std::string& name);
// A fresh temporary file path for the test to write (removed by the caller).
std::string temp_path(const std::string& stem);

// A fresh temporary directory, removed with everything in it when the object dies.
struct TempDir {
  explicit TempDir(const std::string& stem);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string path;
};

}  // namespace kvtest
