// Helpers shared by the tests: seeded random data with the shapes of real K/V.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace kvtest {

// Normal values; with `offset_channels`, every 4th channel is shifted and scaled the way
// post-RoPE key outlier channels are (a range that does not contain 0).
std::vector<float> random_values(std::size_t count, std::uint32_t seed, float stddev = 1.0f);
std::vector<float> random_keys(int tokens, int heads, int dim, std::uint32_t seed);

// max |a - b|, and max |a - b| / max(|b|)
float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);
float relative_error(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace kvtest
