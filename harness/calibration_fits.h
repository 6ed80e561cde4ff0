// The fits `kvbench calibrate` turns timings into rates with: straight lines through (work,
// seconds) points, what the engine counts for an attention call, and the L2 figures derived from
// several measurements. Pure functions, tested on their own.
#pragma once

#include <vector>

namespace kvbench {

// seconds = intercept + slope x work.
struct LineFit {
  double intercept = 0.0;  // seconds, >= 0
  double slope = 0.0;      // seconds per unit of work
  // Units of work per second (1e-9: giga-units), from the slope; where noise made the slope
  // non-positive, from the last point alone.
  double rate(double last_work, double last_seconds) const;
};

// Least squares through the points (the intercept clamped at zero).
LineFit least_squares(const std::vector<double>& work, const std::vector<double>& seconds);

// An attention rate: calls' seconds against their multiply-adds, less each call's exponentials at
// the measured exponential rate. Where that leaves a call no time (a busy machine measured the
// exponentials slowly and the calls fast), the fit takes the calls' whole time instead, so the
// rate stays positive and errs slow; exps_taken_out says which.
struct AttentionFit {
  LineFit line;
  double rate = 0.0;  // giga multiply-adds per second, > 0 for positive call times
  bool exps_taken_out = true;
};
AttentionFit fit_attention(const std::vector<double>& macs, const std::vector<double>& call_seconds,
                           const std::vector<double>& exp_seconds);

// Multiply-adds of one attention call of `queries` causal queries at the end of ctx tokens, for
// q_heads heads of head_dim (q.k and p.v), and the exponentials of its softmax, as the engine
// counts them (n (2 ctx - n + 1) / 2 visible pairs).
double attention_macs(int queries, int ctx, int q_heads, int head_dim);
double attention_exps(int queries, int ctx, int q_heads);

// The cost per unit that two pairs of (units, residual seconds) leave: (r2 - r1) / (u2 - u1),
// never negative.
double residual_per_unit(double units1, double residual1, double units2, double residual2);

// An L2 page read costs latency + bytes / rate: the rate from what a random page read of
// page_bytes takes beyond a 4 KiB read's latency (else the latency would count twice); the all-in
// rate where the page read is not slower.
double l2_page_rate_gbps(double page_read_us, double latency_4k_us, double page_bytes, double all_in_gbps);

// The latency the engine sees per round trip to the device: what its demand loads waited, less
// their bytes at the page rate, per round (0 without rounds).
double l2_engine_latency_us(double waited_s, double rounds, double bytes, double page_rate_gbps);

}  // namespace kvbench
