// Online calibration: prefill pages set reference statistics per (layer, kv head); every page
// sealed later is compared with them.
//
// Reference: the running mean, over pages sealed in the prefill phase, of each K channel's
// min and max and of each V group's absmax (or the first page when a sequence starts in
// decode). A page's health against the reference (as it was before the page):
//   scale_drift: relative change |r - r_ref| / r_ref of K channel ranges (max - min; the
//                scale of integer formats is range / max_code) and of V group absmax (the
//                scale is absmax / midpoint); mean and max over channels and groups.
//   outlier_channel_ratio: share of K channels whose absmax exceeds outlier_factor x the
//                median channel absmax of the page.
//   clip_ratio: share of the page's K and V values that the reference scales would have
//                clipped (K outside [ref_min, ref_max]; |V| above the group's ref absmax).
#pragma once

#include <vector>

#include "quant/quantizer.h"

namespace kv {

inline constexpr float kDefaultOutlierFactor = 5.0f;

struct PageHealth {
  float scale_drift_mean = 0.0f;
  float scale_drift_max = 0.0f;
  float outlier_channel_ratio = 0.0f;
  float clip_ratio = 0.0f;
  bool has_reference = false;  // false for the first page: no reference to compare with yet
};

class Calibration {
 public:
  explicit Calibration(float outlier_factor = kDefaultOutlierFactor) : outlier_factor_(outlier_factor) {}

  // k, v: the page's raw rows [tokens][head_dim]. A prefill page also joins the reference.
  PageHealth observe(const PageStats& stats, const float* k, const float* v, int tokens, int v_group, bool prefill);

  int reference_pages() const { return reference_pages_; }

 private:
  void join_reference(const PageStats& stats);
  float clip_ratio(const float* k, const float* v, int tokens, int v_group) const;

  float outlier_factor_;
  int reference_pages_ = 0;
  std::vector<float> ref_k_min_;
  std::vector<float> ref_k_max_;
  std::vector<float> ref_v_absmax_;
};

}  // namespace kv
