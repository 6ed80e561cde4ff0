// `kvbench run`, `kvbench sweep`, `kvbench list runs`, `kvbench show RUN_ID`, `kvbench export RUN_ID`.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "results_reader.h"
#include "runner.h"
#include "store_location.h"

namespace kvbench {

struct RunCommandOptions {
  std::string suite = "nightly";
  RunOptions run;
  bool json = false;
  bool wide = false;  // the summary in one table whatever the terminal's width
  bool fail_on_degraded = false;  // exit kExitDegraded when some case ran degraded
  std::string socs;  // sweep: the SoCs replacing the suite's, comma-separated
  std::optional<double> noise_threshold;  // replaces the suite's noise_threshold
  bool sim = false;                       // --sim: a sim run whatever the suite says (SuiteConfig::sim)
  std::string shard;                      // --shard I/N, parsed into run.shard
  CLI::App* command = nullptr;
};

struct ResultsCommandOptions {
  std::string db = kDefaultResultsDb;
  std::string what;            // list: runs, baselines or acks
  std::string run_selector;    // show, export: an id, latest, latest:TAG, latest:suite=NAME or a baseline name
  std::int64_t run_id = 0;     // > 0: this run, whatever run_selector says
  std::string format = "json"; // export: json | csv
  std::string out;             // export: "" = stdout
  std::string metrics;         // show: "" = the default columns
  std::string clock;           // show: host or model figures; "": each case's measured ones, else its modelled ones
  bool json = false;           // show, list
  bool wide = false;           // show: one table whatever the terminal's width
  std::string status, suite;   // list filters
  std::vector<std::string> tags;
  int last = 0;                // list: the newest N (0: all)
  CLI::App* list = nullptr;
  CLI::App* show = nullptr;
  CLI::App* exporter = nullptr;
};

void add_run_command(CLI::App& app, RunCommandOptions& options);
// `kvbench sweep --suite S --socs a,b,c`: run with the suite's socs replaced.
void add_sweep_command(CLI::App& app, RunCommandOptions& options);
// "a,b,c" -> the SoC names, each a known profile, none twice (InputError on --socs otherwise).
std::vector<std::string> parse_soc_list(const std::string& text);
void add_results_commands(CLI::App& app, ResultsCommandOptions& options);
// The suite a --suite value names: a built-in name, else a file.
SuiteConfig find_suite(const std::string& name_or_path);

int run_run(const RunCommandOptions& options);
// What `run --json` prints: {run_id, status, db, cases, skipped, failed, degraded,
// stored_repetitions, noisy_repetitions: {noisy, of}, store_writes}.
std::string run_json(const RunSummary& summary, const RepetitionNoise& noise);
int run_list(const ResultsCommandOptions& options, std::FILE* out = stdout);
int run_show(const ResultsCommandOptions& options, std::FILE* out = stdout);
int run_export(const ResultsCommandOptions& options);

}  // namespace kvbench
