#include "quant/calibration.h"

#include <algorithm>
#include <cmath>

namespace kv {

namespace {

// Relative change, 0 when both are 0 and 1 when only the reference is 0.
float relative_change(float value, float reference) {
  if (reference > 0.0f) return std::fabs(value - reference) / reference;
  return value > 0.0f ? 1.0f : 0.0f;
}

float outlier_ratio(const PageStats& stats, float factor) {
  const std::size_t dim = stats.k_min.size();
  std::vector<float> absmax(dim);
  for (std::size_t c = 0; c < dim; ++c) absmax[c] = std::max(std::fabs(stats.k_min[c]), std::fabs(stats.k_max[c]));
  std::vector<float> sorted = absmax;
  std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(dim / 2), sorted.end());
  const float median = sorted[dim / 2];
  const auto outliers = std::count_if(absmax.begin(), absmax.end(), [&](float a) { return a > factor * median; });
  return static_cast<float>(outliers) / static_cast<float>(dim);
}

}  // namespace

void Calibration::join_reference(const PageStats& stats) {
  if (reference_pages_ == 0) {
    ref_k_min_ = stats.k_min;
    ref_k_max_ = stats.k_max;
    ref_v_absmax_ = stats.v_group_absmax;
    reference_pages_ = 1;
    return;
  }
  const float weight = 1.0f / static_cast<float>(++reference_pages_);
  for (std::size_t c = 0; c < ref_k_min_.size(); ++c) {
    ref_k_min_[c] += (stats.k_min[c] - ref_k_min_[c]) * weight;
    ref_k_max_[c] += (stats.k_max[c] - ref_k_max_[c]) * weight;
  }
  for (std::size_t g = 0; g < ref_v_absmax_.size(); ++g) {
    ref_v_absmax_[g] += (stats.v_group_absmax[g] - ref_v_absmax_[g]) * weight;
  }
}

float Calibration::clip_ratio(const float* k, const float* v, int tokens, int v_group) const {
  const std::size_t dim = ref_k_min_.size();
  std::vector<float> v_limit(dim);  // the reference absmax of each channel's group
  for (std::size_t c = 0; c < dim; ++c) v_limit[c] = ref_v_absmax_[c / static_cast<std::size_t>(v_group)];
  std::size_t clipped = 0;
  for (int t = 0; t < tokens; ++t) {
    const float* key = k + static_cast<std::size_t>(t) * dim;
    const float* value = v + static_cast<std::size_t>(t) * dim;
    for (std::size_t c = 0; c < dim; ++c) {
      clipped += static_cast<std::size_t>(key[c] < ref_k_min_[c]) + static_cast<std::size_t>(key[c] > ref_k_max_[c]);
      clipped += std::fabs(value[c]) > v_limit[c];
    }
  }
  return static_cast<float>(clipped) / static_cast<float>(2 * dim * static_cast<std::size_t>(tokens));
}

PageHealth Calibration::observe(const PageStats& stats, const float* k, const float* v, int tokens, int v_group,
                                bool prefill) {
  PageHealth health;
  health.outlier_channel_ratio = outlier_ratio(stats, outlier_factor_);
  if (reference_pages_ > 0 && tokens > 0) {
    health.has_reference = true;
    double drift_sum = 0.0;
    std::size_t terms = 0;
    auto account = [&](float change) {
      drift_sum += change;
      health.scale_drift_max = std::max(health.scale_drift_max, change);
      ++terms;
    };
    for (std::size_t c = 0; c < ref_k_min_.size(); ++c) {
      account(relative_change(stats.k_max[c] - stats.k_min[c], ref_k_max_[c] - ref_k_min_[c]));
    }
    for (std::size_t g = 0; g < ref_v_absmax_.size(); ++g) {
      account(relative_change(stats.v_group_absmax[g], ref_v_absmax_[g]));
    }
    health.scale_drift_mean = static_cast<float>(drift_sum / static_cast<double>(terms));
    health.clip_ratio = clip_ratio(k, v, tokens, v_group);
  }
  if (prefill || reference_pages_ == 0) join_reference(stats);
  return health;
}

}  // namespace kv
