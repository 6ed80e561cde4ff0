#include "comparison.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "statistics.h"

namespace kvbench {

namespace {

// At least this many repetitions per side after leaving out the noisy ones.
constexpr int kMinRepetitions = 3;
// Beyond this many repetitions per side, the hint to run more is no help.
constexpr int kMaxUsefulRepetitions = 50;
// A CPU-time row judged across a busy and a quiet run (core_slowdown set) is only as right as
// the core-speed probe's correction, and the engine's memory-bound work need not feel a busy
// neighbour as the probe's integer job does: the two can move in opposite directions
// (docs/gate.md, Core speed). Such a row is called regressed or improved only beyond the band
// plus the larger of the correction applied and this share.
constexpr double kProbeMismatch = 0.10;

std::vector<double> values_of(const std::vector<Sample>& samples, bool skip_noisy) {
  std::vector<double> v;
  for (const Sample& s : samples) {
    if (!(skip_noisy && s.noisy)) v.push_back(s.value);
  }
  return v;
}

}  // namespace

double quiet_median(const std::vector<Sample>& samples) {
  const std::vector<double> quiet = values_of(samples, true);
  return median(quiet.empty() ? values_of(samples, false) : quiet);
}

namespace {

// +1 when an increase is worse, -1 when a decrease is.
double worse_sign(Better better) { return better == Better::Higher ? -1.0 : 1.0; }

void compare_deterministic(MetricComparison& row, const std::vector<double>& b, const std::vector<double>& c, const MetricRule& rule) {
  const double base = median(b), cand = median(c);
  const double diff = cand - base;
  row.ratio = base != 0.0 ? cand / base : (cand == 0.0 ? 1.0 : std::numeric_limits<double>::infinity());
  row.low = row.high = row.ratio;
  row.p = row.adjusted_p = diff == 0.0 ? 1.0 : 0.0;
  const double scale = std::max(std::fabs(base), std::fabs(cand));
  if (std::fabs(diff) <= rule.absolute || std::fabs(diff) <= rule.relative * scale) {
    row.verdict = Verdict::Unchanged;
    return;
  }
  row.verdict = diff * worse_sign(rule.better) > 0.0 ? Verdict::Regressed : Verdict::Improved;
}

void compare_statistical(MetricComparison& row, const std::vector<double>& b, const std::vector<double>& c, double between,
                         int between_runs) {
  const bool positive = std::all_of(b.begin(), b.end(), [](double x) { return x > 0.0; }) &&
                        std::all_of(c.begin(), c.end(), [](double x) { return x > 0.0; });
  if (!positive) {
    // Zero timings (a span that never ran): equal when both sides are all zero, else a change
    // the log scale cannot express, judged on the raw values.
    const bool zeros = std::all_of(b.begin(), b.end(), [](double x) { return x == 0.0; }) &&
                       std::all_of(c.begin(), c.end(), [](double x) { return x == 0.0; });
    if (zeros) {
      row.verdict = Verdict::Unchanged;
      return;
    }
    const WelchResult w = welch_t_test(b, c);
    const double base = mean(b);
    row.ratio = base > 0.0 ? mean(c) / base : std::numeric_limits<double>::infinity();
    row.low = base > 0.0 ? (base + w.low) / base : row.ratio;
    row.high = base > 0.0 ? (base + w.high) / base : row.ratio;
    row.p = w.p;
    row.spread = std::max(sample_sd(b), sample_sd(c)) / std::max(base, 1e-300);
    row.verdict = Verdict::Inconclusive;  // provisional: decide() sets it
    return;
  }
  std::vector<double> lb(b.size()), lc(c.size());
  std::transform(b.begin(), b.end(), lb.begin(), [](double x) { return std::log(x); });
  std::transform(c.begin(), c.end(), lc.begin(), [](double x) { return std::log(x); });
  const WelchResult w = between > 0.0 ? welch_t_test(lb, lc, between, between_runs - 1.0) : welch_t_test(lb, lc);
  row.between_runs = between > 0.0 ? between_runs : 0;
  row.ratio = std::exp(w.difference);
  row.low = std::exp(w.low);
  row.high = std::exp(w.high);
  row.p = w.p;
  const double nb = static_cast<double>(lb.size()), nc = static_cast<double>(lc.size());
  row.spread = std::sqrt(((nb - 1.0) * sample_sd(lb) * sample_sd(lb) + (nc - 1.0) * sample_sd(lc) * sample_sd(lc)) / (nb + nc - 2.0));
  row.verdict = Verdict::Inconclusive;  // provisional: decide() sets it
}

}  // namespace

const char* verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::Regressed: return "regressed";
    case Verdict::Improved: return "improved";
    case Verdict::Unchanged: return "unchanged";
    case Verdict::Inconclusive: return "inconclusive";
    case Verdict::NotGated: return "not gated";
    case Verdict::Unreliable: return "unreliable";
  }
  return "unknown";
}

std::optional<Verdict> verdict_from_name(std::string_view name) {
  for (Verdict v : {Verdict::Regressed, Verdict::Improved, Verdict::Unchanged, Verdict::Inconclusive, Verdict::NotGated, Verdict::Unreliable}) {
    if (name == verdict_name(v)) return v;
  }
  return std::nullopt;
}

std::optional<double> between_run_variance(const std::vector<std::vector<Sample>>& runs) {
  std::vector<double> means;
  double within = 0.0;  // mean within-run variance of a run's mean
  for (const std::vector<Sample>& run : runs) {
    std::vector<double> logs;
    for (const Sample& s : run) {
      if (!s.noisy && s.value > 0.0) logs.push_back(std::log(s.value));
    }
    if (logs.size() < 2) continue;
    means.push_back(mean(logs));
    within += sample_sd(logs) * sample_sd(logs) / static_cast<double>(logs.size());
  }
  if (means.size() < 3) return std::nullopt;
  within /= static_cast<double>(means.size());
  const double spread = sample_sd(means);
  return std::max(0.0, spread * spread - within);
}

MetricComparison compare_samples(const std::string& metric, const std::vector<Sample>& baseline,
                                 const std::vector<Sample>& candidate, const MetricRule& rule, double between, int between_runs) {
  MetricComparison row;
  row.metric = metric;
  const bool statistical = rule.kind == GateClass::Statistical;
  const std::vector<double> b = values_of(baseline, statistical), c = values_of(candidate, statistical);
  for (const Sample& s : baseline) row.baseline_noisy += s.noisy ? 1 : 0;
  for (const Sample& s : candidate) row.candidate_noisy += s.noisy ? 1 : 0;
  row.baseline_used = static_cast<int>(b.size());
  row.candidate_used = static_cast<int>(c.size());
  if (!b.empty()) row.baseline_median = median(b);
  if (!c.empty()) row.candidate_median = median(c);
  if (!rule.gated || rule.better == Better::None) {
    row.verdict = Verdict::NotGated;
    row.note = rule.better == Better::None ? "not gated: no better direction" : "not gated by the rules";
    return row;
  }
  if (baseline.empty() || candidate.empty()) {
    row.verdict = Verdict::Inconclusive;
    row.estimated = false;
    row.note = baseline.empty() ? "no value in the baseline (n/a there)" : "no value in the candidate (n/a there)";
    return row;
  }
  if (!statistical) {
    compare_deterministic(row, b, c, rule);
    return row;
  }
  const auto all_zero = [](const std::vector<Sample>& v) {
    return std::all_of(v.begin(), v.end(), [](const Sample& s) { return s.value == 0.0; });
  };
  if (all_zero(baseline) && all_zero(candidate)) {
    // A span that never ran on either side: no noise can change that.
    row.verdict = Verdict::Unchanged;
    row.baseline_median = row.candidate_median = 0.0;
    return row;
  }
  if (row.baseline_used < kMinRepetitions || row.candidate_used < kMinRepetitions) {
    row.verdict = Verdict::Unreliable;
    row.estimated = false;
    row.baseline_median = median(values_of(baseline, false));
    row.candidate_median = median(values_of(candidate, false));
    const int noisy = row.baseline_noisy + row.candidate_noisy;
    row.note = noisy > 0 ? fmt::format("{} and {} quiet repetitions of {} and {} ({} needed per side): noise left it undecided; the "
                                       "medians include noisy repetitions",
                                       row.baseline_used, row.candidate_used, baseline.size(), candidate.size(), kMinRepetitions)
                         : fmt::format("{} and {} repetitions ({} needed per side): too few to judge", baseline.size(),
                                       candidate.size(), kMinRepetitions);
    return row;
  }
  compare_statistical(row, b, c, between, between_runs);
  return row;
}

MetricComparison compare_paired_samples(const std::string& metric, const std::vector<Sample>& baseline,
                                        const std::vector<Sample>& candidate, const MetricRule& rule) {
  MetricComparison row = compare_samples(metric, baseline, candidate, rule);
  const bool open = row.verdict == Verdict::Inconclusive || row.verdict == Verdict::Unreliable;
  if (rule.kind != GateClass::Statistical || !open || baseline.size() != candidate.size() || baseline.empty()) return row;
  const auto positive = [](const std::vector<Sample>& v) {
    return std::all_of(v.begin(), v.end(), [](const Sample& s) { return s.value > 0.0; });
  };
  // Zero timings (a wait that happened in some repetitions only) have no log ratio: judged
  // unpaired on the raw values, as compare_samples does.
  if (!positive(baseline) || !positive(candidate)) return row;
  std::vector<double> differences, b, c;
  for (std::size_t i = 0; i < baseline.size(); ++i) {
    if (baseline[i].noisy || candidate[i].noisy) continue;
    differences.push_back(std::log(candidate[i].value) - std::log(baseline[i].value));
    b.push_back(baseline[i].value);
    c.push_back(candidate[i].value);
  }
  row.note.clear();
  row.repetitions_needed = 0;
  row.baseline_used = row.candidate_used = static_cast<int>(differences.size());
  if (static_cast<int>(differences.size()) < kMinRepetitions) {
    row.verdict = Verdict::Unreliable;
    row.estimated = false;
    row.baseline_median = median(values_of(baseline, false));
    row.candidate_median = median(values_of(candidate, false));
    row.note = fmt::format("{} pairs with both repetitions quiet, of {} ({} needed): noise left it undecided; the medians include "
                           "every repetition",
                           differences.size(), baseline.size(), kMinRepetitions);
    return row;
  }
  const WelchResult w = paired_t_test(differences);
  row.estimated = true;
  row.baseline_median = median(b);
  row.candidate_median = median(c);
  row.ratio = std::exp(w.difference);
  row.low = std::exp(w.low);
  row.high = std::exp(w.high);
  row.p = w.p;
  // Per side, so that the two-sample power calculation in decide() asks for as many pairs.
  row.spread = sample_sd(differences) / std::sqrt(2.0);
  row.verdict = Verdict::Inconclusive;  // provisional: decide() sets it
  return row;
}

std::optional<std::vector<Sample>> at_core_speed(const std::vector<Sample>& samples, const std::vector<Sample>& probes,
                                                 double reference) {
  if (samples.size() != probes.size() || !(reference > 0.0)) return std::nullopt;
  std::vector<Sample> out = samples;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (!(probes[i].value > 0.0)) return std::nullopt;
    // At the reference speed already (a pair left as measured): the value itself, not x * r / r.
    if (probes[i].value != reference) out[i].value = samples[i].value * reference / probes[i].value;
  }
  return out;
}

void judge_by_cpu_rows(std::vector<MetricComparison>& case_rows) {
  for (MetricComparison& row : case_rows) {
    if (row.verdict != Verdict::Unreliable) continue;
    const std::string cpu = cpu_counterpart(row.metric);
    if (cpu.empty()) continue;
    for (const MetricComparison& other : case_rows) {
      if (other.metric != cpu) continue;
      const bool decided = other.verdict == Verdict::Regressed || other.verdict == Verdict::Improved || other.verdict == Verdict::Unchanged;
      if (decided) {
        row.judged_by = cpu;
        row.judged_verdict = other.verdict;
      } else if (other.verdict == Verdict::Inconclusive) {
        // Its interval crosses the band while the wall time was noisy: noise left the span
        // undecided, and a stand-in that cannot tell must not let the comparison pass.
        row.note += "; its CPU-time row " + cpu + " is inconclusive too";
      }
    }
  }
}

void decide(std::vector<MetricComparison>& rows, const std::vector<MetricRule>& rules, double fdr) {
  std::vector<std::size_t> tested;
  std::vector<double> p;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rules[i].kind != GateClass::Statistical || rows[i].verdict != Verdict::Inconclusive || !rows[i].note.empty()) continue;
    tested.push_back(i);
    p.push_back(rows[i].p);
  }
  const std::vector<double> q = benjamini_hochberg(p);
  for (std::size_t t = 0; t < tested.size(); ++t) {
    MetricComparison& row = rows[tested[t]];
    const MetricRule& rule = rules[tested[t]];
    row.adjusted_p = q[t];
    const double band = std::log1p(rule.relative);
    const double sign = worse_sign(rule.better);
    const double estimate = std::log(row.ratio) * sign;
    const double a = std::log(row.low) * sign, b = std::log(row.high) * sign;
    const double low = std::min(a, b), high = std::max(a, b);
    const bool tiny = row.baseline_median && row.candidate_median &&
                      std::fabs(*row.candidate_median - *row.baseline_median) <= rule.absolute;
    // The change a verdict needs: the band, widened for rows judged across a busy and a quiet run.
    const double called = row.core_slowdown ? band + std::max(std::fabs(std::log(*row.core_slowdown)), std::log1p(kProbeMismatch)) : band;
    if (tiny) {
      row.verdict = Verdict::Unchanged;
    } else if (row.adjusted_p <= fdr && estimate > called) {
      row.verdict = Verdict::Regressed;
    } else if (row.adjusted_p <= fdr && estimate < -called) {
      row.verdict = Verdict::Improved;
    } else if (low >= -band && high <= band) {
      row.verdict = Verdict::Unchanged;
    } else if (row.core_slowdown && row.adjusted_p <= fdr) {
      // Past the band, but not past what the busy run alone could have moved it by.
      row.verdict = Verdict::Inconclusive;
      row.note = fmt::format("{:+.1f}% is past the {}% band but within {:.1f}%, what CPU time can move between a busy and a quiet "
                             "run (the core-speed probe's correction, {:+.1f}%, may be off by as much): rerun on a quiet machine",
                             (std::exp(estimate * sign) - 1.0) * 100.0, rule.relative * 100.0, std::expm1(called) * 100.0,
                             (*row.core_slowdown - 1.0) * 100.0);
    } else {
      row.verdict = Verdict::Inconclusive;
      const int have = std::min(row.baseline_used, row.candidate_used);
      const int needed = repetitions_to_settle(row.spread, rule.relative);
      row.note = fmt::format("the interval crosses the {}% band", rule.relative * 100.0);
      if (row.between_runs > 0) {
        // Runs scatter between themselves: more repetitions of one run do not narrow that part.
        row.note += fmt::format(" (runs scatter between themselves, from {} earlier runs: more repetitions of one run would not "
                                "settle it)",
                                row.between_runs);
      } else if (needed > kMaxUsefulRepetitions) {
        row.note += fmt::format("; its repetitions scatter too widely (sd {:.3g} of the log values) for more of them to settle "
                                "it: look at the machine's noise",
                                row.spread);
      } else if (needed > have) {
        row.repetitions_needed = needed;
        row.note += fmt::format("; about {} repetitions per side would settle it", needed);
      }
    }
  }
}

}  // namespace kvbench
