// The nightly result as one self-contained HTML page: inline SVG plots and CSS, no network,
// readable with JavaScript off and printable. Sections, in order: the verdict against the
// baseline, trends over the suite's recent runs, each case's water levels, swap, time
// breakdown, TPOT distribution, selection and drift with its dropped critical tokens, sparse
// quality against the oracle, Pareto fronts per SoC, the cross-SoC comparison and the run's
// metadata. A section without data says so in one line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "comparison_record.h"
#include "results_store.h"

namespace kvbench::report {

struct ReportOptions {
  std::int64_t run_id = 0;
  // The gate's comparison of this run with its baseline (what `kvbench compare --format json`
  // prints and verdicts store); nullopt: no baseline.
  std::optional<ComparisonRecord> comparison;
  std::string baseline_note;  // where the comparison comes from (a stored verdict, --baseline)
  int history = 30;           // trends: the suite's last N complete runs, up to this one
  std::string suite;          // "": the run's suite
  std::string gnuplot;        // "": gnuplot on PATH
};

struct ReportOutcome {
  std::string html;
  int plots = 0, drawn = 0;
  std::string plot_note;  // "plots unavailable: gnuplot not found", when so
};

struct ReportModel;

// The page of a model read from the store (report_model.h), gnuplot at `gnuplot` ("": on PATH).
ReportOutcome render_report(const ReportModel& model, const std::string& gnuplot = "");
// load_report_model, then render_report.
ReportOutcome build_report(ResultsStore& store, const ReportOptions& options);

}  // namespace kvbench::report
