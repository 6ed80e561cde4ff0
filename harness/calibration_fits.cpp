#include "calibration_fits.h"

#include <algorithm>

namespace kvbench {

double LineFit::rate(double last_work, double last_seconds) const {
  if (slope > 0.0) return 1e-9 / slope;
  return last_seconds > 0.0 ? 1e-9 * last_work / last_seconds : 0.0;
}

AttentionFit fit_attention(const std::vector<double>& macs, const std::vector<double>& call_seconds,
                           const std::vector<double>& exp_seconds) {
  AttentionFit out;
  if (macs.empty() || macs.size() != call_seconds.size() || macs.size() != exp_seconds.size()) return out;
  std::vector<double> less(call_seconds.size());
  bool time_left = true;
  for (std::size_t i = 0; i < less.size(); ++i) {
    less[i] = call_seconds[i] - exp_seconds[i];
    time_left = time_left && less[i] > 0.0;
  }
  if (time_left) {
    out.line = least_squares(macs, less);
    out.rate = out.line.rate(macs.back(), less.back());
  }
  if (!(out.rate > 0.0)) {
    out.exps_taken_out = false;
    out.line = least_squares(macs, call_seconds);
    out.rate = out.line.rate(macs.back(), call_seconds.back());
  }
  return out;
}

LineFit least_squares(const std::vector<double>& work, const std::vector<double>& seconds) {
  const double n = static_cast<double>(work.size());
  if (work.empty() || work.size() != seconds.size()) return {};
  double mx = 0.0, my = 0.0;
  for (std::size_t i = 0; i < work.size(); ++i) {
    mx += work[i] / n;
    my += seconds[i] / n;
  }
  double sxx = 0.0, sxy = 0.0;
  for (std::size_t i = 0; i < work.size(); ++i) {
    sxx += (work[i] - mx) * (work[i] - mx);
    sxy += (work[i] - mx) * (seconds[i] - my);
  }
  const double slope = sxx > 0.0 ? sxy / sxx : 0.0;
  return {std::max(0.0, my - slope * mx), slope};
}

double attention_macs(int queries, int ctx, int q_heads, int head_dim) {
  const double pairs = static_cast<double>(queries) * (2.0 * ctx - queries + 1) / 2.0;
  return 2.0 * pairs * q_heads * head_dim;
}

double attention_exps(int queries, int ctx, int q_heads) {
  return static_cast<double>(queries) * (2.0 * ctx - queries + 1) / 2.0 * q_heads;
}

double residual_per_unit(double units1, double residual1, double units2, double residual2) {
  return units2 != units1 ? std::max(0.0, (residual2 - residual1) / (units2 - units1)) : 0.0;
}

double l2_page_rate_gbps(double page_read_us, double latency_4k_us, double page_bytes, double all_in_gbps) {
  const double beyond = page_read_us - latency_4k_us;
  return beyond > 0.0 ? (page_bytes - 4096.0) / (beyond * 1e-6) * 1e-9 : all_in_gbps;
}

double l2_engine_latency_us(double waited_s, double rounds, double bytes, double page_rate_gbps) {
  if (rounds <= 0.0 || page_rate_gbps <= 0.0) return 0.0;
  return (waited_s - bytes / (page_rate_gbps * 1e9)) / rounds * 1e6;
}

}  // namespace kvbench
