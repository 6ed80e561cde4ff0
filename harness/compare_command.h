// `kvbench baseline set|list|show|rm`, `kvbench ack [list|rm]`, `kvbench compare` and `kvbench gate`: a candidate run
// against a baseline, row by (case, metric), as a table, JSON, Markdown (a PR comment) or JUnit
// (CI's test report); the gate stores its verdict and exits 1 on a regression.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "comparison_record.h"
#include "results_store.h"
#include "run_comparison.h"
#include "store_location.h"

namespace kvbench {

inline constexpr int kExitInconclusive = 4;
inline constexpr int kExitUnreliable = 5;
// The runs' benchmark definitions differ: exact and modelled rows wait for a new baseline.
inline constexpr int kExitNeedsBaseline = 6;

struct CompareCommandOptions {
  std::string db = kDefaultResultsDb;
  std::string baseline, candidate;  // run selectors
  std::string format = "table";     // compare: table | json | markdown | junit
  bool all = false;                 // compare: unchanged and not-gated rows too
  std::string rules;                // "": the built-in configs/gate.json
  bool require_same_config = false, allow_machine_change = false;
  std::string junit, markdown, json;  // gate: files to write
  std::string inconclusive = "pass";  // gate: pass | fail
  std::string unreliable = "fail";    // gate: pass | fail
  // baseline
  std::string name, run, reason;
  CLI::App *baseline_cmd = nullptr, *set = nullptr, *list = nullptr, *show = nullptr, *rm = nullptr;
  CLI::App *compare = nullptr, *gate = nullptr;
  // ack
  std::string ack_run, ack_metric, ack_case = "*", ack_reason, ack_baseline;
  std::int64_t ack_id = 0;
  CLI::App *ack = nullptr, *ack_list = nullptr, *ack_rm = nullptr;
};

void add_compare_commands(CLI::App& app, CompareCommandOptions& options);
// Runs whichever of the commands was parsed; false when none was.
bool run_compare_commands(const CompareCommandOptions& options, int& exit_code);

// The baselines and the acknowledgements as `baseline list`, `ack list` and `list` print them.
void print_baselines(ResultsStore& store, bool as_json, std::FILE* out);
void print_acks(ResultsStore& store, bool as_json, std::FILE* out);

// The gate rules of `--rules PATH` ("" : the built-in configs/gate.json), with their text.
struct LoadedRules {
  std::string text;
  GateRules rules;
};
LoadedRules load_gate_rules(const std::string& path);

// The renderings of a comparison record (the gate writes each to its file; its JSON form is
// comparison_record_json).
// Which test judged the statistical rows, as the table's last line names it: Welch's t-test on
// the log values of two runs (compare, gate), or a paired t-test on the per-pair log ratios of
// interleaved repetitions (ab: CompareOptions::paired).
enum class HostTimingTest { Welch, Paired };
std::string comparison_table(const ComparisonRecord& c, bool all, HostTimingTest test = HostTimingTest::Welch);
// What fails a gate beside unacknowledged regressions.
struct GateStrictness {
  bool inconclusive_fails = false;
  bool unreliable_fails = true;
};
std::string comparison_junit(const ComparisonRecord& c, const GateStrictness& strictness);
// The headline says what the gate with this strictness decides.
std::string comparison_markdown(const ComparisonRecord& c, const GateStrictness& strictness = {});

}  // namespace kvbench
