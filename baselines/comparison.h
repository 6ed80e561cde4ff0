// Comparing a candidate run with a baseline, one (case, metric) at a time, on the raw
// per-repetition samples. Two classes of figure:
//
// - Deterministic (clock exact or model, and what the rules put there): the same seed gives
//   the same value, so the medians are compared value to value; any change beyond the
//   relative tolerance is regressed or improved, with no statistics.
// - Statistical (host and cpu clocks): noisy repetitions are left out of wall-time rows (CPU
//   time and instructions use every repetition: waiting for a core does not lengthen them; a
//   case whose repetitions did not share their conditions, some noisy and others quiet, has
//   its CPU times judged at the baseline's core speed, because a neighbour that slows the
//   cores themselves does lengthen them);
//   Welch's t-test on the log values gives the ratio candidate / baseline, its 95% interval
//   and a p-value; the p-values of one comparison are adjusted by Benjamini-Hochberg. A row is
//   regressed when it is significant after the adjustment and its estimate lies beyond the
//   threshold in the worse direction, improved symmetrically, unchanged when its interval lies
//   inside the threshold band, and inconclusive otherwise (enough quiet repetitions, but the
//   interval crosses the band). A row with fewer than 3 usable repetitions on a side (noise or
//   too few repetitions) is unreliable: no statistics, never a silent pass.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "metric_table.h"

namespace kvbench {

enum class GateClass : std::uint8_t { Deterministic, Statistical };

// How one metric is judged (configs/gate.json; see gate_rules.h).
struct MetricRule {
  bool gated = true;
  Better better = Better::Lower;  // None: reported, never gated
  GateClass kind = GateClass::Statistical;
  double relative = 0.05;  // statistical: the threshold band; deterministic: the tolerance
  double absolute = 0.0;   // differences at or below it are no change (both classes)
};

enum class Verdict : std::uint8_t { Regressed, Improved, Unchanged, Inconclusive, NotGated, Unreliable };
const char* verdict_name(Verdict verdict);
std::optional<Verdict> verdict_from_name(std::string_view name);  // verdict_name's inverse

struct Sample {
  double value = 0.0;
  bool noisy = false;
};

// The median of the quiet samples, of all of them when none is quiet; samples not empty.
double quiet_median(const std::vector<Sample>& samples);

struct MetricComparison {
  std::string metric;
  Verdict verdict = Verdict::Unchanged;
  // Over the repetitions compared; an unreliable row: over every repetition, noisy ones too.
  std::optional<double> baseline_median, candidate_median;
  double ratio = 1.0;       // statistical: exp(mean log difference); deterministic: candidate / baseline
  double low = 1.0, high = 1.0;  // statistical: the 95% interval of the ratio
  // False when ratio, low, high and p are not estimates (an unreliable or one-sided row):
  // outputs print no change and `null`, with the note saying why.
  bool estimated = true;
  double p = 1.0;           // statistical: Welch's p before adjustment
  double adjusted_p = 1.0;  // after Benjamini-Hochberg over the comparison's statistical rows
  int baseline_used = 0, candidate_used = 0;  // repetitions compared (noisy ones left out)
  int baseline_noisy = 0, candidate_noisy = 0;
  double spread = 0.0;         // statistical: pooled standard deviation of the log values
  int repetitions_needed = 0;  // inconclusive: per side, to likely settle it (0: more would not help)
  std::string note;            // why inconclusive, unreliable or not gated
  // An unreliable wall-time row whose span's CPU-time row (cpu_counterpart) had the
  // repetitions to be judged: that row judged the span (its verdict), and this one does not make
  // the comparison unreliable.
  std::string judged_by;
  Verdict judged_verdict = Verdict::Unreliable;
  int between_runs = 0;        // statistical: earlier runs the between-run variance came from (0: none)
  // A CPU-time row of a case whose repetitions were some noisy and some quiet, judged at the
  // baseline's core speed (at_core_speed): the candidate's median probe / the baseline's.
  // nullopt: judged as measured. Set, decide() calls the row regressed or improved only past a
  // band widened for the probe's possible error (comparison.cpp, kProbeMismatch).
  std::optional<double> core_slowdown;
  std::string acknowledged;    // a regressed row someone accepted: the ack's reason ("" none)
};

// One (case, metric) before the adjustment: Verdict is provisional for statistical rows until
// decide() has seen every row of the comparison.
// `between`: the between-run variance of the metric's log values for this case (0: unknown),
// estimated from `between_runs` earlier runs of the same configuration (between_run_variance).
MetricComparison compare_samples(const std::string& metric, const std::vector<Sample>& baseline,
                                 const std::vector<Sample>& candidate, const MetricRule& rule, double between = 0.0,
                                 int between_runs = 0);

// The same for interleaved A/B runs, whose i-th repetitions ran as a pair one after the other:
// statistical rows are judged on the per-pair log differences (a paired t-test), so load that
// rises and falls across the pairs cancels; a wall-time pair counts only when both of its
// repetitions are quiet. Other rows, and sides of unequal length, as compare_samples.
MetricComparison compare_paired_samples(const std::string& metric, const std::vector<Sample>& baseline,
                                        const std::vector<Sample>& candidate, const MetricRule& rule);

// How much runs of one configuration scatter beyond their repetitions: from each run's log
// values (noisy repetitions left out), the variance of the run means minus the mean within-run
// variance of a mean (a method-of-moments random-effects estimate, at least 0). nullopt with
// fewer than 3 runs of at least 2 values.
std::optional<double> between_run_variance(const std::vector<std::vector<Sample>>& runs);

// A busy neighbour can slow the cores themselves, and CPU time with them (harness/cpu_probe.h).
// CPU-time samples at a reference core speed: each repetition's value x reference / that
// repetition's probe (noise_cpu_probe_ms of the same repetition). nullopt when the probes do
// not match the samples one to one or one is not positive: the row is then judged as measured.
std::optional<std::vector<Sample>> at_core_speed(const std::vector<Sample>& samples, const std::vector<Sample>& probes,
                                                 double reference);

// Within one case's rows, after decide(): an unreliable wall-time row whose span's CPU-time row
// was decided (regressed, improved or unchanged) is marked judged_by that row, with its verdict:
// the comparison takes the CPU-time row's verdict for the span, and a regression fails. A
// CPU-time row that is inconclusive (its interval crosses the band: on a busy machine, its
// repetitions scatter) settles nothing: the wall-time row stays unreliable and says so, so the
// span is undecided by noise (exit 5), never a pass.
void judge_by_cpu_rows(std::vector<MetricComparison>& case_rows);

// Adjusts the p-values of the statistical rows (rules[i] belongs to rows[i]) at false
// discovery rate `fdr` and sets every statistical row's verdict.
void decide(std::vector<MetricComparison>& rows, const std::vector<MetricRule>& rules, double fdr = 0.05);

}  // namespace kvbench
