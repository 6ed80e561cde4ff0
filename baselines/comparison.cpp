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
  }
  return "unknown";
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
    row.note = baseline.empty() ? "no value in the baseline (n/a there)" : "no value in the candidate (n/a there)";
    return row;
  }
  if (!statistical) {
    compare_deterministic(row, b, c, rule);
    return row;
  }
  if (row.baseline_used < kMinRepetitions || row.candidate_used < kMinRepetitions) {
    row.verdict = Verdict::Inconclusive;
    row.note = fmt::format("too few quiet repetitions ({} and {} of {} and {} left after leaving out noisy ones; {} needed)",
                           row.baseline_used, row.candidate_used, baseline.size(), candidate.size(), kMinRepetitions);
    row.repetitions_needed = kMinRepetitions;
    return row;
  }
  compare_statistical(row, b, c, between, between_runs);
  return row;
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
    if (tiny) {
      row.verdict = Verdict::Unchanged;
    } else if (row.adjusted_p <= fdr && estimate > band) {
      row.verdict = Verdict::Regressed;
    } else if (row.adjusted_p <= fdr && estimate < -band) {
      row.verdict = Verdict::Improved;
    } else if (low >= -band && high <= band) {
      row.verdict = Verdict::Unchanged;
    } else {
      row.verdict = Verdict::Inconclusive;
      row.repetitions_needed = repetitions_to_settle(row.spread, rule.relative);
      row.note = fmt::format("the interval crosses the {}% band; about {} repetitions per side would settle it",
                             rule.relative * 100.0, row.repetitions_needed);
      if (row.between_runs > 0) row.note += fmt::format(" (runs also scatter between themselves, from {} earlier runs)", row.between_runs);
    }
  }
}

}  // namespace kvbench
