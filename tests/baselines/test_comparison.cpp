// The gate's decision on synthetic comparisons: A/A at 5 repetitions rarely fails, a 10% shift
// at 10 repetitions is found and nothing else is, deterministic figures change on any
// difference, and noisy repetitions are left out; CPU times rescale to a core speed.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "comparison.h"

using namespace kvbench;

namespace {

std::vector<Sample> lognormal(std::mt19937& rng, int n, double median, double cv) {
  const double sigma = std::sqrt(std::log1p(cv * cv));
  std::normal_distribution<double> normal(std::log(median), sigma);
  std::vector<Sample> v(static_cast<std::size_t>(n));
  for (Sample& s : v) s.value = std::exp(normal(rng));
  return v;
}

MetricRule timing() { return MetricRule{true, Better::Lower, GateClass::Statistical, 0.05, 0.0}; }

// One comparison of `metrics` host timings; metric 0 is shifted by `shift`.
std::vector<MetricComparison> comparison(std::mt19937& rng, int metrics, int n, double cv, double shift) {
  std::vector<MetricComparison> rows;
  std::vector<MetricRule> rules(static_cast<std::size_t>(metrics), timing());
  for (int m = 0; m < metrics; ++m) {
    const auto base = lognormal(rng, n, 10.0, cv);
    const auto cand = lognormal(rng, n, 10.0 * (m == 0 ? 1.0 + shift : 1.0), cv);
    rows.push_back(compare_samples("metric" + std::to_string(m), base, cand, rules.back()));
  }
  decide(rows, rules, 0.05);
  return rows;
}

}  // namespace

TEST_CASE("A/A: comparisons of one distribution rarely regress", "[gate]") {
  std::mt19937 rng(7);
  for (double cv : {0.05, 0.15}) {
    int failing = 0, unchanged = 0, rows_total = 0;
    for (int trial = 0; trial < 200; ++trial) {
      const auto rows = comparison(rng, 30, 5, cv, 0.0);
      bool failed = false;
      for (const auto& row : rows) {
        failed = failed || row.verdict == Verdict::Regressed;
        unchanged += row.verdict == Verdict::Unchanged ? 1 : 0;
        ++rows_total;
      }
      failing += failed ? 1 : 0;
    }
    INFO("cv " << cv << ": " << failing << " of 200 comparisons with a false regression; " << unchanged << " of " << rows_total
               << " rows unchanged");
    CHECK(failing <= 10);  // 5%
  }
}

TEST_CASE("A/B: a 10% shift at 10 repetitions is found, and only it", "[gate]") {
  std::mt19937 rng(11);
  int detected = 0, other_regressions = 0;
  for (int trial = 0; trial < 200; ++trial) {
    const auto rows = comparison(rng, 30, 10, 0.03, 0.10);
    detected += rows[0].verdict == Verdict::Regressed ? 1 : 0;
    for (std::size_t i = 1; i < rows.size(); ++i) other_regressions += rows[i].verdict == Verdict::Regressed ? 1 : 0;
  }
  INFO(detected << " of 200 detected; " << other_regressions << " false regressions elsewhere");
  CHECK(detected >= 180);
  CHECK(other_regressions == 0);
}

TEST_CASE("A statistical row: direction, interval and the inconclusive middle", "[gate]") {
  std::mt19937 rng(3);
  // Throughput: higher is better, so a drop regresses.
  MetricRule tps = timing();
  tps.better = Better::Higher;
  std::vector<MetricComparison> rows = {compare_samples("decode_tps", lognormal(rng, 10, 100.0, 0.02), lognormal(rng, 10, 80.0, 0.02), tps)};
  decide(rows, {tps});
  CHECK(rows[0].verdict == Verdict::Regressed);
  CHECK(rows[0].ratio == Approx(0.8).epsilon(0.05));
  CHECK(rows[0].low < rows[0].ratio);
  CHECK(rows[0].high > rows[0].ratio);
  // The same drop on a lower-is-better metric is an improvement.
  rows = {compare_samples("tpot_ms_p50", lognormal(rng, 10, 100.0, 0.02), lognormal(rng, 10, 80.0, 0.02), timing())};
  decide(rows, {timing()});
  CHECK(rows[0].verdict == Verdict::Improved);
  // A spread above the band at 3 repetitions: inconclusive, with a number that would settle it.
  rows = {compare_samples("ttft_ms", lognormal(rng, 3, 100.0, 0.03), lognormal(rng, 3, 100.0, 0.03), timing())};
  decide(rows, {timing()});
  CAPTURE(rows[0].note, rows[0].spread);
  CHECK(rows[0].verdict == Verdict::Inconclusive);
  CHECK(rows[0].repetitions_needed > 3);
  CHECK(rows[0].repetitions_needed <= 50);
  CHECK(rows[0].note.find("repetitions per side would settle it") != std::string::npos);
  // A spread no practical number of repetitions settles: no such hint.
  rows = {compare_samples("ttft_ms", lognormal(rng, 3, 100.0, 0.3), lognormal(rng, 3, 100.0, 0.3), timing())};
  decide(rows, {timing()});
  CHECK(rows[0].verdict == Verdict::Inconclusive);
  CHECK(rows[0].repetitions_needed == 0);
  CHECK(rows[0].note.find("would settle") == std::string::npos);
  CHECK(rows[0].note.find("scatter too widely") != std::string::npos);
  // Inconclusive rows keep both medians and their interval.
  CHECK(rows[0].baseline_median);
  CHECK(rows[0].candidate_median);
  CHECK(rows[0].estimated);
  CHECK(rows[0].low < rows[0].high);
}

TEST_CASE("Noisy repetitions are left out, and too few left is unreliable, never a pass", "[gate]") {
  std::vector<Sample> base = {{10.0, false}, {10.1, false}, {9.9, false}, {10.0, true}, {50.0, true}};
  std::vector<Sample> cand = {{10.0, false}, {10.05, false}, {9.95, false}, {10.0, false}, {10.02, false}};
  std::vector<MetricComparison> rows = {compare_samples("tpot_ms_p50", base, cand, timing())};
  decide(rows, {timing()});
  CHECK(rows[0].baseline_used == 3);
  CHECK(rows[0].baseline_noisy == 2);
  CHECK(rows[0].verdict == Verdict::Unchanged);
  for (Sample& s : base) s.noisy = true;
  rows = {compare_samples("tpot_ms_p50", base, cand, timing())};
  decide(rows, {timing()});
  CHECK(rows[0].verdict == Verdict::Unreliable);
  CHECK(rows[0].note.find("0 and 5 quiet repetitions of 5 and 5") != std::string::npos);
  CHECK_FALSE(rows[0].estimated);
  // Both medians are still shown, over every repetition.
  REQUIRE(rows[0].baseline_median);
  CHECK(*rows[0].baseline_median == Approx(10.0));
  REQUIRE(rows[0].candidate_median);
  // Too few repetitions without any noise: unreliable as well, saying so.
  rows = {compare_samples("tpot_ms_p50", {{10.0, false}, {10.1, false}}, {{20.0, false}, {20.2, false}}, timing())};
  decide(rows, {timing()});
  CHECK(rows[0].verdict == Verdict::Unreliable);
  CHECK(rows[0].note.find("too few to judge") != std::string::npos);
  // A span that never ran on either side is unchanged, noise or not.
  rows = {compare_samples("span_decode_dma_wait_ms", {{0.0, true}, {0.0, true}}, {{0.0, true}, {0.0, true}}, timing())};
  decide(rows, {timing()});
  CHECK(rows[0].verdict == Verdict::Unchanged);
}

TEST_CASE("An unreliable wall-time row is judged by its span's CPU-time row when that row decided", "[gate]") {
  std::mt19937 rng(5);
  std::vector<Sample> noisy_base = lognormal(rng, 5, 20.0, 0.02), noisy_cand = lognormal(rng, 5, 90.0, 0.3);
  for (Sample& s : noisy_base) s.noisy = true;
  for (Sample& s : noisy_cand) s.noisy = true;
  const auto case_rows = [&](const std::vector<Sample>& cpu_base, const std::vector<Sample>& cpu_cand) {
    std::vector<MetricComparison> rows = {compare_samples("tpot_ms_p50", noisy_base, noisy_cand, timing()),
                                          compare_samples("span_decode_total_cpu_ms", cpu_base, cpu_cand, timing()),
                                          compare_samples("span_decode_dma_wait_ms", noisy_base, noisy_cand, timing())};
    decide(rows, {timing(), timing(), timing()});
    judge_by_cpu_rows(rows);
    return rows;
  };
  // CPU time regressed: it judges tpot; dma wait has no CPU-time row and stays unreliable.
  auto rows = case_rows(lognormal(rng, 5, 20.0, 0.01), lognormal(rng, 5, 25.0, 0.01));
  CHECK(rows[1].verdict == Verdict::Regressed);
  CHECK(rows[0].verdict == Verdict::Unreliable);
  CHECK(rows[0].judged_by == "span_decode_total_cpu_ms");
  CHECK(rows[0].judged_verdict == Verdict::Regressed);
  CHECK(rows[2].verdict == Verdict::Unreliable);
  CHECK(rows[2].judged_by.empty());
  // CPU time inconclusive (too wide): it settles nothing; tpot stays unreliable and says why.
  rows = case_rows(lognormal(rng, 5, 20.0, 0.3), lognormal(rng, 5, 21.0, 0.3));
  CHECK(rows[1].verdict == Verdict::Inconclusive);
  CHECK(rows[0].verdict == Verdict::Unreliable);
  CHECK(rows[0].judged_by.empty());
  CHECK(rows[0].note.find("its CPU-time row span_decode_total_cpu_ms is inconclusive too") != std::string::npos);
  // CPU time itself short of repetitions: nothing judges tpot.
  rows = case_rows({{20.0, false}, {20.1, false}}, {{20.0, false}, {20.2, false}});
  CHECK(rows[1].verdict == Verdict::Unreliable);
  CHECK(rows[0].judged_by.empty());
}

TEST_CASE("Paired A/B cancels a load that rises and falls across the pairs", "[gate]") {
  std::mt19937 rng(9);
  std::normal_distribution<double> jitter(0.0, 0.01);
  std::vector<Sample> base, same, slow;
  for (int i = 0; i < 6; ++i) {
    const double load = 1.0 + 0.6 * std::sin(i);  // the machine's load across the night
    base.push_back({10.0 * load * std::exp(jitter(rng)), false});
    same.push_back({10.0 * load * std::exp(jitter(rng)), false});
    slow.push_back({11.5 * load * std::exp(jitter(rng)), false});
  }
  std::vector<MetricComparison> rows = {compare_paired_samples("tpot_ms_p50", base, same, timing()),
                                        compare_paired_samples("decode_tps", base, slow, timing()),
                                        compare_samples("tpot_ms_p50", base, slow, timing())};
  decide(rows, {timing(), timing(), timing()});
  CHECK(rows[0].verdict == Verdict::Unchanged);
  CHECK(rows[1].verdict == Verdict::Regressed);
  CHECK(rows[1].ratio == Approx(1.15).epsilon(0.03));
  CHECK(rows[2].verdict == Verdict::Inconclusive);  // unpaired, the load swamps it
  // A pair with a noisy member is left out; fewer than 3 usable pairs is unreliable.
  for (std::size_t i = 0; i < 4; ++i) base[i].noisy = true;
  rows = {compare_paired_samples("tpot_ms_p50", base, slow, timing())};
  decide(rows, {timing()});
  CHECK(rows[0].verdict == Verdict::Unreliable);
  CHECK(rows[0].note.find("2 pairs with both repetitions quiet, of 6") != std::string::npos);
}

TEST_CASE("Deterministic figures change on any difference beyond the tolerance", "[gate]") {
  const MetricRule exact{true, Better::Higher, GateClass::Deterministic, 1e-9, 0.0};
  const std::vector<Sample> base = {{0.9557, false}, {0.9557, true}};
  std::vector<MetricComparison> rows = {compare_samples("attn_mass_recall", base, {{0.9557, false}, {0.9557, false}}, exact)};
  CHECK(rows[0].verdict == Verdict::Unchanged);
  rows = {compare_samples("attn_mass_recall", base, {{0.9556, false}}, exact)};
  CHECK(rows[0].verdict == Verdict::Regressed);  // no statistics: any drop
  rows = {compare_samples("attn_mass_recall", base, {{0.96, false}}, exact)};
  CHECK(rows[0].verdict == Verdict::Improved);
  // Degradation counts: any new one regresses.
  const MetricRule count{true, Better::Lower, GateClass::Deterministic, 0.0, 0.0};
  rows = {compare_samples("l2_errors", {{0.0, false}}, {{1.0, false}}, count)};
  CHECK(rows[0].verdict == Verdict::Regressed);
  // better: none is reported, never gated.
  const MetricRule none{true, Better::None, GateClass::Statistical, 0.05, 0.0};
  rows = {compare_samples("noise_cpu_share", {{0.0, false}}, {{0.5, false}}, none)};
  CHECK(rows[0].verdict == Verdict::NotGated);
}

// Not a check: the table of docs/gate.md (run by name, `kvbench-tests "[.][gate-power]" -s`).
TEST_CASE("power of the default gate against a 10% change", "[.][gate-power]") {
  std::mt19937 rng(5);
  for (double cv : {0.03, 0.05}) {
    for (int n : {3, 4, 5, 6, 8, 10, 15, 20}) {
      int detected = 0;
      for (int trial = 0; trial < 1000; ++trial) detected += comparison(rng, 30, n, cv, 0.10)[0].verdict == Verdict::Regressed ? 1 : 0;
      WARN("cv " << cv << " n " << n << ": " << detected / 10.0 << "% of 1000 comparisons find a 10% slowdown");
    }
  }
}

TEST_CASE("Runs that scatter between themselves widen the interval instead of regressing", "[gate]") {
  std::mt19937 rng(13);
  // Each run's level moves by a lognormal 8% around the truth; repetitions inside a run by 2%.
  std::normal_distribution<double> level(0.0, 0.08);
  const auto run = [&] {
    const double shift = std::exp(level(rng));
    return lognormal(rng, 5, 10.0 * shift, 0.02);
  };
  std::vector<std::vector<Sample>> earlier;
  for (int i = 0; i < 8; ++i) earlier.push_back(run());
  const auto between = between_run_variance(earlier);
  REQUIRE(between);
  CHECK(std::sqrt(*between) == Approx(0.08).margin(0.05));
  CHECK_FALSE(between_run_variance({earlier[0], earlier[1]}));  // fewer than 3 runs: unknown
  int false_without = 0, false_with = 0;
  for (int trial = 0; trial < 200; ++trial) {
    // Each comparison estimates the scatter from its own 8 earlier runs, the baseline among them.
    const auto base = run(), cand = run();
    std::vector<std::vector<Sample>> history = {base};
    for (int i = 0; i < 7; ++i) history.push_back(run());
    const double estimated = between_run_variance(history).value_or(0.0);
    std::vector<MetricComparison> plain = {compare_samples("tpot_ms_p50", base, cand, timing())};
    std::vector<MetricComparison> mixed = {compare_samples("tpot_ms_p50", base, cand, timing(), estimated, 8)};
    decide(plain, {timing()});
    decide(mixed, {timing()});
    false_without += plain[0].verdict == Verdict::Regressed ? 1 : 0;
    false_with += mixed[0].verdict == Verdict::Regressed ? 1 : 0;
  }
  INFO("false regressions in 200 A/A pairs: " << false_without << " within-run only, " << false_with << " with the between-run part");
  CHECK(false_without > 20);  // within-run spread alone takes run-to-run drift for a change
  CHECK(false_with <= 10);
}

TEST_CASE("at_core_speed rescales each repetition by its own probe, or not at all", "[core-speed]") {
  const std::vector<Sample> cpu{{100.0, false}, {120.0, true}, {90.0, false}};
  const std::vector<Sample> probe{{5.0, false}, {6.0, true}, {4.5, false}};
  const auto scaled = at_core_speed(cpu, probe, 5.0);
  REQUIRE(scaled);
  REQUIRE(scaled->size() == 3);
  CHECK((*scaled)[0].value == Approx(100.0));
  CHECK((*scaled)[1].value == Approx(100.0));
  CHECK((*scaled)[1].noisy);
  CHECK((*scaled)[2].value == Approx(100.0));
  // Probes that do not match the samples one to one, or a probe that is not positive: as measured.
  CHECK_FALSE(at_core_speed(cpu, {{5.0, false}, {6.0, false}}, 5.0));
  CHECK_FALSE(at_core_speed(cpu, {{5.0, false}, {0.0, false}, {4.5, false}}, 5.0));
  CHECK_FALSE(at_core_speed(cpu, probe, 0.0));
}
