#include "cli.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <exception>

#include "build_info.h"
#include "metric_table.h"
#include "run_command.h"
#include "score_command.h"
#include "sparse_eval_command.h"
#include "synth_stats_command.h"
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

int run_cli(int argc, char** argv) {
  CLI::App app{"kvbench: KV-cache benchmark and regression harness for on-device LLM inference"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", version_text());
  auto* version = app.add_subcommand("version", "Print the version, build and kernel paths");
  auto* metrics = app.add_subcommand("metrics", "Print the metric glossary (name, unit, clock, better, what it covers) as Markdown");
  ScoreOptions score;
  add_score_command(app, score);
  SynthStatsOptions synth_stats;
  add_synth_stats_command(app, synth_stats);
  SparseEvalOptions sparse_eval;
  add_sparse_eval_command(app, sparse_eval);
  RunCommandOptions run;
  add_run_command(app, run);
  ResultsCommandOptions results;
  add_results_commands(app, results);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }

  try {
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
    if (app.got_subcommand("sparse-eval")) return run_sparse_eval(sparse_eval);
    if (run.command->parsed()) return run_run(run);
    if (results.list->parsed()) return run_list(results);
    if (results.show->parsed()) return run_show(results);
    if (results.exporter->parsed()) return run_export(results);
    fmt::print("{}", app.help());
    return kExitOk;
  } catch (const kv::InputError& error) {
    fmt::print(stderr, "kvbench: error: {}\n", error.what());
    return kExitBadInput;
  } catch (const std::exception& error) {
    fmt::print(stderr, "kvbench: internal error: {}\n", error.what());
    return kExitInternal;
  }
}

}  // namespace kvbench
