// The one mergeable online-softmax state: a view over [running max, running sum, out[dim]]
// where out is the exp-weighted (not yet normalised) sum of values. Splitting attention over
// pages, threads or chunks is always: compute partial states, then merge in logical order.
#pragma once

#include <cmath>
#include <cstddef>
#include <limits>

namespace kv {

class SoftmaxState {
 public:
  SoftmaxState(float* storage, int dim) : p_(storage), dim_(dim) {}

  static std::size_t stride(int dim) { return static_cast<std::size_t>(dim) + 2; }

  float& max() { return p_[0]; }
  float max() const { return p_[0]; }
  float& sum() { return p_[1]; }
  float sum() const { return p_[1]; }
  float* out() { return p_ + 2; }
  const float* out() const { return p_ + 2; }
  int dim() const { return dim_; }
  bool empty() const { return p_[1] == 0.0f; }

  void reset() {
    p_[0] = -std::numeric_limits<float>::infinity();
    p_[1] = 0.0f;
    for (int i = 0; i < dim_; ++i) p_[2 + i] = 0.0f;
  }

  // this := this (+) other. Correct when either or both are empty.
  void merge(const SoftmaxState& other) {
    if (other.empty()) return;
    if (empty()) {
      for (int i = 0; i < dim_ + 2; ++i) p_[i] = other.p_[i];
      return;
    }
    const float new_max = std::fmax(max(), other.max());
    const float mine = std::exp(max() - new_max);
    const float theirs = std::exp(other.max() - new_max);
    for (int i = 0; i < dim_; ++i) out()[i] = out()[i] * mine + other.out()[i] * theirs;
    sum() = sum() * mine + other.sum() * theirs;
    max() = new_max;
  }

  // Normalised output; zeros for an empty state (no visible token).
  void write_output(float* dst) const {
    const float inv = empty() ? 0.0f : 1.0f / sum();
    for (int i = 0; i < dim_; ++i) dst[i] = out()[i] * inv;
  }

 private:
  float* p_;
  int dim_;
};

}  // namespace kv
