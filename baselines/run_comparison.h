// A candidate run against a baseline run: cases matched by (model, workload, policy, soc), every
// metric of a matched case compared under the gate rules, unmatched cases listed, pairs whose
// resolved configuration differs marked with the fields that differ, and pairs measured on
// another kernel path or CPU marked not comparable (not gated) unless allowed. Runs of different
// benchmark definitions (workloads/benchmark_definition.h) compare their host timings only: the
// exact and modelled rows are not gated, and the comparison asks for a new baseline.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gate_rules.h"
#include "results_reader.h"

namespace kvbench {

struct CompareOptions {
  bool require_same_config = false;   // refuse pairs whose configuration differs
  bool allow_machine_change = false;  // gate host timings across CPUs or kernel paths, with a caveat
  // Estimate the between-run variance from earlier runs; off for interleaved A/B runs, whose
  // repetitions are separate processes taken in turn (drift is already in their spread).
  bool between_runs = true;
  // Interleaved A/B runs: the i-th repetitions of a case ran as a pair; compare within pairs.
  bool paired = false;
};

struct CaseComparison {
  std::string name;                         // model/workload/policy/soc
  std::vector<std::string> config_changes;  // "policies.sparse.budget: 0.25 -> 0.1"
  std::string not_comparable;               // why host (and maybe exact) rows are not gated; "" comparable
  std::vector<MetricComparison> rows;
};

struct RunComparison {
  RunRecord baseline, candidate;
  std::vector<CaseComparison> cases;
  std::vector<std::string> only_in_baseline, only_in_candidate;
  std::vector<std::string> caveats;
  // (baseline's, candidate's) benchmark definition when they differ.
  std::optional<std::pair<int, int>> definition_change;
  double fdr = 0.05;
  int count(Verdict verdict) const;
  // Regressed rows nobody acknowledged: what fails a gate.
  int failing() const;
  // Unreliable rows that no CPU-time row judged: what makes a comparison unreliable.
  int unreliable() const;
};

// Acknowledged regressions (the acks table) are marked on their rows: an ack of the candidate
// itself, or of an earlier candidate against the same baseline, covers the cases and metric it
// names. Throws kv::InputError for a run that is not complete (naming its status), runs of different
// suites, or (require_same_config) a pair whose configuration differs.
RunComparison compare_runs(ResultsStore& store, std::int64_t baseline, std::int64_t candidate, const GateRules& rules,
                           const CompareOptions& options);

// The benchmark definition a run was measured under: its resolved configuration's
// `benchmark_definition`, 1 when absent (runs stored before the field existed). Throws
// kv::InputError when the field is not a positive integer.
int run_benchmark_definition(const RunRecord& run);

// Why the sim clock's rows of two runs do not compare ("" when they do): one is not a sim run, or
// they counted another way - the kernel path under valgrind, valgrind's version, the compiler,
// the C library, the engine's threads or L2 mode, the simulated caches or callgrind's options
// (their meta_json "sim").
std::string sim_setup_difference(const RunRecord& a, const RunRecord& b);

// The kernel path a run's attention used: its metadata's kernel_path, else what its CPU flags
// allow.
std::string run_kernel_path(const RunRecord& run);

// What differs for one case between two runs' resolved configurations (config_json): its
// model's, workload's and policy's fields and the seed and warmup, as "path: old -> new",
// sorted; empty when nothing does. The list a comparison's config_changes holds (the gate's,
// trend's marks).
std::vector<std::string> case_config_changes(const RunRecord& base, const RunRecord& cand, const CaseSamples& c);

}  // namespace kvbench
