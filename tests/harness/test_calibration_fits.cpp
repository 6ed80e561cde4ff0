// The fits calibrate turns timings into rates with (harness/calibration_fits.h).
#include <catch2/catch.hpp>

#include "calibration_fits.h"

using namespace kvbench;

TEST_CASE("least_squares recovers a line and clamps a negative intercept", "[calibration]") {
  const LineFit line = least_squares({1e6, 4e6, 16e6}, {10e-6 + 1e6 * 2e-12, 10e-6 + 4e6 * 2e-12, 10e-6 + 16e6 * 2e-12});
  CHECK(line.intercept == Approx(10e-6));
  CHECK(line.slope == Approx(2e-12));
  CHECK(line.rate(16e6, 0.0) == Approx(500.0));  // 1 / 2e-12 per second, in giga-units
  const LineFit below = least_squares({1.0, 2.0}, {1.0, 3.0});
  CHECK(below.intercept == 0.0);
  // Noise that flattens the slope: the rate from the last point alone.
  const LineFit flat = least_squares({1.0, 2.0}, {2.0, 1.0});
  CHECK(flat.rate(2e9, 1.0) == Approx(2.0));
  CHECK(least_squares({}, {}).slope == 0.0);
}

TEST_CASE("Attention work is counted as the engine counts it", "[calibration]") {
  CHECK(attention_macs(1, 1024, 32, 128) == 2.0 * 1024 * 32 * 128);
  CHECK(attention_exps(1, 1024, 32) == 1024.0 * 32);
  // Three causal queries at the end of 10 tokens see 8, 9 and 10 keys.
  CHECK(attention_macs(3, 10, 1, 1) == 2.0 * (8 + 9 + 10));
  CHECK(attention_exps(3, 10, 2) == 2.0 * (8 + 9 + 10));
}

TEST_CASE("Residual and L2 fits", "[calibration]") {
  CHECK(residual_per_unit(10.0, 1.0, 30.0, 5.0) == Approx(0.2));
  CHECK(residual_per_unit(10.0, 5.0, 30.0, 1.0) == 0.0);
  CHECK(residual_per_unit(10.0, 1.0, 10.0, 5.0) == 0.0);
  // A 36 KiB page read in 100 us where 4 KiB takes 60 us: 32 KiB beyond it in 40 us.
  CHECK(l2_page_rate_gbps(100.0, 60.0, 36864.0, 9.9) == Approx(32768.0 / 40e-6 * 1e-9));
  CHECK(l2_page_rate_gbps(50.0, 60.0, 36864.0, 9.9) == 9.9);
  // 10 round trips for 400 KB waited 2 ms at 1 GB/s: 400 us of it bytes, 160 us a round.
  CHECK(l2_engine_latency_us(2e-3, 10.0, 400e3, 1.0) == Approx(160.0));
  CHECK(l2_engine_latency_us(2e-3, 0.0, 0.0, 1.0) == 0.0);
}

TEST_CASE("an attention fit takes the exponentials out where they leave the calls time, else keeps them", "[calibration]") {
  const std::vector<double> macs = {1e6, 4e6, 16e6};
  const std::vector<double> calls = {10e-6 + 1e6 * 2e-12, 10e-6 + 4e6 * 2e-12, 10e-6 + 16e6 * 2e-12};
  // Exponentials a tenth of each call: taken out, the slope is steeper than the calls' own.
  std::vector<double> exps;
  for (double t : calls) exps.push_back(0.1 * t);
  const AttentionFit out = fit_attention(macs, calls, exps);
  CHECK(out.exps_taken_out);
  CHECK(out.rate == Approx(1e-9 / (0.9 * 2e-12)));
  // Exponentials measured so slowly that they exceed the calls (a starved measurement): the
  // whole calls' time, a positive rate that errs slow, never zero.
  const AttentionFit whole = fit_attention(macs, calls, {1.0, 1.0, 1.0});
  CHECK_FALSE(whole.exps_taken_out);
  CHECK(whole.rate == Approx(500.0));
  CHECK(whole.rate > 0.0);
}
