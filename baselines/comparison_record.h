// A comparison as a record: what `compare --format json`, `gate --json` and the verdict a gate
// stores say, as one typed struct with its JSON form, so that its writers and its readers (the
// report, the nightly flow) agree field by field instead of by key strings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "run_comparison.h"

namespace kvbench {

struct ComparisonRowRecord {
  std::string case_name, metric;
  Verdict verdict = Verdict::Unchanged;
  std::string acknowledged;  // the ack's reason ("" none)
  std::optional<double> baseline_median, candidate_median;
  // nullopt where the row has no estimate (an unreliable or one-sided row; the note says why).
  std::optional<double> ratio, ratio_low, ratio_high, p, adjusted_p;
  std::optional<std::string> judged_by;  // the CPU-time row that settled an unreliable one
  std::optional<Verdict> judged_verdict;
  std::optional<double> core_slowdown;
  int baseline_repetitions = 0, candidate_repetitions = 0, noisy_left_out = 0, repetitions_needed = 0;
  std::string note;

  // Ratio, interval and p are estimates (false: an unreliable or one-sided row).
  bool estimated() const { return ratio.has_value(); }
  // A statistical row (an interval around the ratio) rather than a deterministic change.
  bool statistical() const { return ratio_low && ratio_high && *ratio_low != *ratio_high; }
  // A regression nobody acknowledged: what fails a gate.
  bool failing() const { return verdict == Verdict::Regressed && acknowledged.empty(); }
  // Left undecided by noise, and no CPU-time row settled it.
  bool unreliable() const { return verdict == Verdict::Unreliable && !judged_by; }
};

struct ComparisonCaseRecord {
  std::string name;
  std::vector<std::string> config_changes;
  std::string not_comparable;
};

struct ComparisonRecord {
  std::int64_t baseline_run = 0, candidate_run = 0;
  std::string suite;
  double fdr = 0.05;
  int regressed = 0;
  int failing = 0;                   // regressed rows nobody acknowledged
  int unreliable = 0;                // unreliable rows no CPU-time row judged
  int unreliable_judged_by_cpu = 0;
  std::string outcome;               // pass, fail, inconclusive, unreliable, definition-changed
  // Nothing regressed, nothing left undecided (wall-time rows judged by CPU time alone included:
  // a baseline needs quiet wall times), and the same benchmark definition: the only night a
  // nightly flow may promote.
  bool plain_pass = false;
  int improved = 0, inconclusive = 0, unchanged = 0, not_gated = 0;
  std::vector<std::string> caveats;
  std::optional<std::pair<int, int>> definition_changed;  // (from, to) benchmark definition
  std::vector<std::string> only_in_baseline, only_in_candidate;
  std::vector<ComparisonCaseRecord> cases;
  std::vector<ComparisonRowRecord> rows;  // regressed first, then unreliable, improved, inconclusive, unchanged, not gated
};

// Regressed 0, unreliable 1, improved 2, inconclusive 3, unchanged 4, not gated 5.
int verdict_order(Verdict verdict);
// A comparison's outcome: definition-changed, fail, unreliable, inconclusive (fail when
// inconclusive_fails) or pass.
std::string comparison_outcome(const ComparisonRecord& c, bool inconclusive_fails);

// The record of a comparison; its rows regressed first, then unreliable, improved, inconclusive,
// unchanged and not gated, each group in case order.
ComparisonRecord comparison_record(const RunComparison& c);
std::string comparison_record_json(const ComparisonRecord& record);  // indented
// A stored or written record. Fields a record from an older kvbench lacks read as their
// defaults (`failing`: every regression). Throws kv::InputError(where, field, reason) for text
// that is not a comparison record.
ComparisonRecord parse_comparison_record(std::string_view text, const std::string& where);

}  // namespace kvbench
