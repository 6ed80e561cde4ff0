#include "report_command.h"

#include "cli_checks.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "cli.h"
#include "compare_command.h"
#include "report.h"
#include "results_reader.h"
#include "results_store.h"
#include "run_comparison.h"
#include "runtime/error.h"

namespace kvbench {

void add_report_command(CLI::App& app, ReportCommandOptions& o) {
  o.command = app.add_subcommand("report", "Write a run as one self-contained HTML page with plots (DIR/index.html)");
  add_db_option(o.command, "--db", o.db, "results database")->capture_default_str();
  o.command->add_option("--run", o.run, std::string(kRunSelectorHelp) + " (default: the latest complete run)");
  o.command->add_option("--baseline", o.baseline, "compare with this run (default: the baseline of the run's stored gate verdict)");
  o.command->add_option("--history", o.history, "trends: the suite's last N complete runs")->check(whole_number_in(1, 10000))->capture_default_str();
  o.command->add_option("--suite", o.suite, "trends: this suite's runs (default: the run's suite)");
  o.command->add_option("--out", o.out, "directory to write index.html into (created if missing)")->required();
}

namespace {

// The newest complete run, the default.
std::int64_t latest_complete(ResultsStore& store) {
  RunFilter filter;
  filter.status = "complete";
  const auto runs = list_runs(store, filter);
  if (runs.empty()) throw kv::InputError(store.path(), "--run", "holds no complete run (`kvbench list runs` shows what it holds)");
  return runs.back().id;
}

}  // namespace

int run_report(const ReportCommandOptions& o) {
  ResultsStore store(o.db, Access::ReadOnly);
  const std::int64_t run_id = o.run == "latest:complete" ? latest_complete(store) : resolve_run(store, o.run, "--run");
  report::ReportOptions options;
  options.run_id = run_id;
  options.history = o.history;
  options.suite = o.suite;
  if (!o.baseline.empty()) {
    const std::int64_t base = resolve_run(store, o.baseline, "--baseline");
    const LoadedRules rules = load_gate_rules("");
    options.comparison = comparison_record(compare_runs(store, base, run_id, rules.rules, {}));
    options.baseline_note = fmt::format("compared now with the built-in gate rules (--baseline {})", o.baseline);
  } else {
    const auto verdicts = list_verdicts(store, run_id);
    if (!verdicts.empty()) {
      const VerdictRow& v = verdicts.back();
      options.comparison = parse_comparison_record(v.rows_json, fmt::format("{}: verdict {} of run {}", o.db, v.id, run_id));
      options.baseline_note = fmt::format("the gate's stored verdict {} of {}: {}", v.id, v.created_at, v.outcome);
    }
  }
  const report::ReportOutcome page = report::build_report(store, options);

  // Written beside its final name and renamed: never a half-written page.
  std::error_code ec;
  std::filesystem::create_directories(o.out, ec);
  if (ec || !std::filesystem::is_directory(o.out)) throw kv::InputError(o.out, "--out", "cannot create the directory" + (ec ? ": " + ec.message() : ""));
  const std::filesystem::path target = std::filesystem::path(o.out) / "index.html";
  const std::filesystem::path partial = std::filesystem::path(o.out) / ".index.html.partial";
  {
    std::ofstream file(partial, std::ios::binary);
    file << page.html;
    if (!file.flush()) throw kv::InputError(partial.string(), "--out", "cannot write");
  }
  std::filesystem::rename(partial, target, ec);
  if (ec) throw kv::InputError(target.string(), "--out", "cannot write: " + ec.message());
  fmt::print("report of run {} written to {} ({} plots{}, {:.1f} KiB)\n", run_id, target.string(), page.plots,
             page.plot_note.empty() ? "" : "; " + page.plot_note, static_cast<double>(page.html.size()) / 1024.0);
  return kExitOk;
}

}  // namespace kvbench
