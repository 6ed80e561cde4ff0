// `kvbench report [--db PATH] [--run SEL] [--baseline SEL] [--history N] [--suite S] --out DIR`:
// writes DIR/index.html, the run as one self-contained page (reports/report.h). The baseline is
// the one of the run's latest stored gate verdict unless --baseline names one (then the gate's
// comparison is made afresh with the built-in rules); without either the banner says so.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "store_location.h"

namespace kvbench {

struct ReportCommandOptions {
  std::string db = kDefaultResultsDb;
  std::string run = "latest:complete";
  std::string baseline;
  int history = 30;
  std::string suite;
  std::string out;
  CLI::App* command = nullptr;
};

void add_report_command(CLI::App& app, ReportCommandOptions& options);
int run_report(const ReportCommandOptions& options);

}  // namespace kvbench
