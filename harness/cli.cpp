#include "cli.h"

#include "store_location.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <sstream>

#include <CLI/CLI.hpp>
#include <exception>

#include "build_info.h"
#include "ab_command.h"
#include "calibrate_command.h"
#include "pareto_command.h"
#include "merge_command.h"
#include "prune_command.h"
#include "report_command.h"
#include "validate_command.h"
#include "compare_command.h"
#include "trend_command.h"
#include "metric_table.h"
#include "run_command.h"
#include "score_command.h"
#include "sim_repetition_command.h"
#include "sparse_eval_command.h"
#include "synth_stats_command.h"
#include "attn_stats_command.h"
#include "runtime/error.h"
#include "runtime/isa.h"

namespace kvbench {

std::string version_text() {
  std::string supported;
  for (kv::Isa isa : kv::supported_isas()) {
    if (!supported.empty()) supported += ' ';
    supported += kv::isa_name(isa);
  }
  return fmt::format("kvbench {} (git {}, {}, {})\nkernels: {} (supported: {})", KVBENCH_VERSION, KVBENCH_GIT_SHA,
                     KVBENCH_BUILD_TYPE, KVBENCH_COMPILER, kv::isa_name(kv::best_isa()), supported);
}

namespace {

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// CLI11's messages as `<argument>: <reason>`, the arguments named as typed.
std::string usage_message(const CLI::ParseError& error, const std::string& command) {
  const std::string what = trim(error.what());
  const std::string convert = "Could not convert: ";
  if (what.rfind(convert, 0) == 0) {  // "Could not convert: NAME = VALUE"
    const std::string rest = what.substr(convert.size());
    const auto eq = rest.find(" = ");
    if (eq != std::string::npos) return fmt::format("{}: '{}' is not a number", rest.substr(0, eq), rest.substr(eq + 3));
  }
  const std::string extras = "not expected: ";
  if (const auto at = what.find(extras); at != std::string::npos) {
    // CLI11 lists them last first.
    std::vector<std::string> args;
    std::stringstream in(what.substr(at + extras.size()));
    for (std::string arg; in >> arg;) args.insert(args.begin(), arg);
    if (!args.empty()) {
      return fmt::format("{}: unexpected argument{} to `kvbench{}{}`", args.front(), args.size() > 1 ? " (and " + std::to_string(args.size() - 1) + " more)" : "",
                         command.empty() ? "" : " ", command);
    }
  }
  const std::string required = " is required";
  if (what.size() > required.size() && what.compare(what.size() - required.size(), required.size(), required) == 0) {
    return what.substr(0, what.size() - required.size()) + ": required";
  }
  return what;
}

// Every subcommand's options, filled by CLI11 as it parses.
struct Commands {
  CLI::App* version = nullptr;
  CLI::App* metrics = nullptr;
  ScoreOptions score;
  SynthStatsOptions synth_stats;
  AttnStatsOptions attn_stats;
  SparseEvalOptions sparse_eval;
  RunCommandOptions run;
  RunCommandOptions sweep;
  ResultsCommandOptions results;
  CompareCommandOptions compare;
  TrendOptions trend;
  AbOptions ab;
  CalibrateOptions calibrate;
  ValidateOptions validate;
  ParetoOptions pareto;
  ReportCommandOptions report;
  PruneCommandOptions prune;
  MergeOptions merge;
  SimRepetitionOptions sim_repetition;

  void add(CLI::App& app) {
    version = app.add_subcommand("version", "Print the version, build and kernel paths");
    metrics = app.add_subcommand("metrics", "Print the metric glossary (name, unit, clock, better, what it covers) as Markdown");
    add_score_command(app, score);
    add_synth_stats_command(app, synth_stats);
    add_attn_stats_command(app, attn_stats);
    add_sparse_eval_command(app, sparse_eval);
    add_run_command(app, run);
    add_sweep_command(app, sweep);
    add_results_commands(app, results);
    add_compare_commands(app, compare);
    add_trend_command(app, trend);
    add_ab_command(app, ab);
    add_calibrate_command(app, calibrate);
    add_validate_command(app, validate);
    add_pareto_command(app, pareto);
    add_report_command(app, report);
    add_prune_command(app, prune);
    add_merge_command(app, merge);
    add_sim_repetition_command(app, sim_repetition);
  }

  // The parsed subcommand's exit code.
  int dispatch(const CLI::App& app) {
    if (version->parsed()) {
      fmt::print("{}\n", version_text());
      return kExitOk;
    }
    if (metrics->parsed()) {
      fmt::print("{}", metric_glossary_markdown());
      return kExitOk;
    }
    if (app.got_subcommand("score")) return run_score(score);
    if (app.got_subcommand("synth-stats")) return run_synth_stats(synth_stats);
    if (app.got_subcommand("attn-stats")) return run_attn_stats(attn_stats);
    if (app.got_subcommand("sparse-eval")) return run_sparse_eval(sparse_eval);
    if (run.command->parsed()) return run_run(run);
    if (sweep.command->parsed()) return run_run(sweep);
    if (results.list->parsed()) return run_list(results);
    if (results.show->parsed()) return run_show(results);
    if (results.exporter->parsed()) return run_export(results);
    if (int code = 0; run_compare_commands(compare, code)) return code;
    if (trend.command->parsed()) return run_trend(trend);
    if (ab.command->parsed()) return run_ab(ab);
    if (calibrate.command->parsed()) return run_calibrate(calibrate);
    if (validate.command->parsed()) return run_validate(validate);
    if (pareto.command->parsed()) return run_pareto(pareto);
    if (report.command->parsed()) return run_report(report);
    if (prune.command->parsed()) return run_prune(prune);
    if (merge.command->parsed()) return run_merge(merge);
    if (sim_repetition.command->parsed()) return run_sim_repetition(sim_repetition);
    fmt::print("{}", app.help());
    return kExitOk;
  }
};

// The subcommand named as typed, when it is none of them (CLI11 would list every argument, last
// first); "" otherwise.
std::string unknown_subcommand(const CLI::App& app, int argc, char** argv) {
  if (argc <= 1 || argv[1][0] == '-') return "";
  const std::string name = argv[1];
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name() == name) return "";
    if (!sub->get_group().empty()) names.push_back(sub->get_name());  // hidden ones are not offered
  }
  return fmt::format("kvbench: {}: unknown subcommand (one of: {}; `kvbench --help` says what each does)\n", name, fmt::join(names, ", "));
}

}  // namespace

int run_cli(int argc, char** argv) {
  CLI::App app{"kvbench: KV-cache benchmark and regression harness for on-device LLM inference"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", version_text());
  Commands commands;
  commands.add(app);
  if (const std::string unknown = unknown_subcommand(app, argc, argv); !unknown.empty()) {
    fmt::print(stderr, "{}", redact_uris(unknown));
    return kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);  // --help, --version
    std::string command;
    for (const CLI::App* sub : app.get_subcommands({})) {
      if (sub->parsed()) command = sub->get_name();
    }
    fmt::print(stderr, "kvbench: {}\n(`kvbench {}--help` for usage)\n", redact_uris(usage_message(error, command)),
               command.empty() ? "" : command + " ");
    return kExitBadInput;
  }

  try {
    return commands.dispatch(app);
  } catch (const kv::InputError& error) {
    fmt::print(stderr, "kvbench: {}\n", redact_uris(error.what()));
    return kExitBadInput;
  } catch (const std::exception& error) {
    fmt::print(stderr, "kvbench: internal error: {}\n", redact_uris(error.what()));
    return kExitInternal;
  }
}

}  // namespace kvbench
