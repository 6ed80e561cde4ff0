// What a report shows, read from the store once: the run (both clocks), the comparison with
// its baseline, the suite's recent runs for the trends, and each case's own recordings (series,
// events, histograms) with what its configuration says about reading them. The sections render
// from this value alone, so each is tested on a model built in the test.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "comparison_record.h"
#include "model_validation.h"
#include "report.h"
#include "results_reader.h"
#include "results_store.h"
#include "run_event.h"
#include "run_view.h"

namespace kvbench::report {

// What the stored configuration says about a case's model and policy, for reading its series.
struct CaseShape {
  double layer_scale = 1.0;  // model layers / executed layers: series of executed layers to the whole model
  bool selects = true;       // its selector chooses pages (not full or window)
};

// One case's engine run, repetition 1.
struct CaseRecordings {
  std::map<std::string, std::vector<double>> series;
  std::vector<RunEvent> events;
  std::map<std::string, std::vector<std::int64_t>> histograms;
  CaseShape shape;
};

// A device run (`kvbench run --soc NAME` on a board, merged home) of a SoC the report prices:
// its measured cases against the model of that SoC's profile.
struct DeviceRun {
  RunRecord record;
  std::string soc, machine;  // the profile it was priced with; the board (else the CPU)
  std::vector<ValidationRow> rows;
};

struct ReportModel {
  RunRecord record;
  RunView host, model;  // the run on the host clock and on the model clock
  std::string suite;    // the trends' suite
  std::optional<ComparisonRecord> comparison;
  std::string baseline_note;
  std::int64_t baseline_run = 0;  // 0: none
  // The suite's last `history` complete runs up to this one, oldest first, this one included.
  std::vector<std::int64_t> history;
  std::map<std::int64_t, RunView> history_views;
  std::map<std::string, CaseRecordings> recordings;  // by case name: cases with an engine run of their own
  std::map<std::string, std::string> policy_budgets;  // policy -> "hybrid 10%"
  // The newest complete device run of each SoC the run prices (or was itself priced as).
  std::vector<DeviceRun> device_runs;
};

// A case is a SoC's pricing of the host case's engine run (its recordings are the host
// case's), when it completed, is not the host's and did not rerun with the SoC's capacities.
bool priced_from_host(const RunView& run, const CaseView& c);

// The shape of a case from the run's resolved configuration (JSON text).
CaseShape case_shape(const std::string& config_json, const CaseView& c);

ReportModel load_report_model(ResultsStore& store, const ReportOptions& options);

}  // namespace kvbench::report
