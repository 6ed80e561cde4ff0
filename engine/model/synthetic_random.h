// Counter-based randomness for the synthetic generator: every draw is a pure function of the
// seed and its coordinates, so any (layer, head, position) regenerates without state and every
// machine draws the same bits.
#pragma once

#include <cstdint>

namespace kv::synth {

// The streams every generator draws from (the `tag` of hash_of); a generator's own streams take
// other letters.
inline constexpr std::uint64_t kTagKey = 0x4b, kTagValue = 0x56, kTagQuery = 0x51;

inline std::uint64_t splitmix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline std::uint64_t hash_of(std::uint64_t seed, std::uint64_t layer, std::uint64_t head, std::uint64_t pos,
                             std::uint64_t tag) {
  return splitmix(seed ^ splitmix(layer * 0x100000001B3ull ^ splitmix(head * 0x9E3779B1ull ^ splitmix(pos ^ (tag << 56)))));
}

// Normals from one 64-bit draw: four 16-bit uniforms summed (Irwin-Hall(4)), rescaled to mean 0
// and variance 1. Only integer and float arithmetic: the same on every machine.
class NormalStream {
 public:
  explicit NormalStream(std::uint64_t key) : state_(key) {}
  float next() {
    const std::uint64_t r = splitmix(state_++);
    const float sum = static_cast<float>((r & 0xFFFF) + ((r >> 16) & 0xFFFF) + ((r >> 32) & 0xFFFF) + (r >> 48));
    return (sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;  // sqrt(12 / 4)
  }
  float uniform() { return static_cast<float>(splitmix(state_++) >> 40) * (1.0f / 16777216.0f); }

 private:
  std::uint64_t state_;
};

// out += R(pos) * x over every pair (x zero outside its support).
inline void add_rotated(const float* x, int dim, float scale, const float* cos_pos, const float* sin_pos, float* out) {
  for (int i = 0; i < dim / 2; ++i) {
    const float a = x[2 * i], b = x[2 * i + 1];
    if (a == 0.0f && b == 0.0f) continue;
    out[2 * i] += scale * (a * cos_pos[i] - b * sin_pos[i]);
    out[2 * i + 1] += scale * (a * sin_pos[i] + b * cos_pos[i]);
  }
}

}  // namespace kv::synth
