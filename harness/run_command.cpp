#include "run_command.h"

#include "cli_checks.h"
#include "compare_command.h"
#include "suite_config.h"
#include "terminal_width.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <signal.h>

#include <algorithm>
#include <tuple>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>

#include "builtin_suites.h"
#include "case_metrics.h"
#include "cli.h"
#include "degradation.h"
#include "interrupt.h"
#include "results_reader.h"
#include "results_store.h"
#include "run_view.h"
#include "summary_table.h"
#include "runtime/error.h"
#include "soc_profiles.h"

namespace kvbench {

namespace {

using json = nlohmann::json;

std::string csv_field(const std::string& v) {
  if (v.find_first_of(",\"\n") == std::string::npos) return v;
  std::string out = "\"";
  for (char ch : v) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

// The repetitions a case stored figures for, in order.
std::set<int> stored_repetitions(const CaseRecord& c) {
  std::set<int> repetitions;
  for (const MetricRow& m : c.metrics) repetitions.insert(m.repetition);
  return repetitions;
}

// Every series of a case: [{repetition, name, values}], the values in stored order (one per
// step, or one per request for the per-request series), null where none was recorded.
json series_json(ResultsStore& store, std::int64_t run_id, const CaseRecord& c) {
  json out = json::array();
  for (const int repetition : stored_repetitions(c)) {
    for (const auto& [name, values] : load_series(store, run_id, c.name, repetition)) {
      json list = json::array();
      for (const double v : values) list.push_back(std::isfinite(v) ? json(v) : json(nullptr));
      out.push_back({{"repetition", repetition}, {"name", name}, {"values", list}});
    }
  }
  return out;
}

// Every histogram of a case: [{repetition, name, counts}], counts[i] the count of bin i.
json histograms_json(ResultsStore& store, std::int64_t run_id, const CaseRecord& c) {
  json out = json::array();
  for (const int repetition : stored_repetitions(c)) {
    for (const auto& [name, counts] : load_histograms(store, run_id, c.name, repetition)) {
      out.push_back({{"repetition", repetition}, {"name", name}, {"counts", counts}});
    }
  }
  return out;
}

}  // namespace

SuiteConfig find_suite(const std::string& name_or_path) {
  for (const auto& [name, text] : builtin_suites()) {
    if (name == name_or_path) return parse_suite(text, "builtin:" + name, ".");
  }
  if (!std::filesystem::exists(name_or_path)) {
    std::string names;
    for (const auto& suite : builtin_suites()) names += (names.empty() ? "" : ", ") + suite.first;
    throw kv::InputError(name_or_path, "--suite", "neither a built-in suite (" + names + ") nor a file");
  }
  return load_suite(name_or_path);
}

namespace {

void add_run_options(CLI::App* cmd, RunCommandOptions& o) {
  add_db_option(cmd, "--db", o.run.db_path, "results database")->capture_default_str();
  cmd->add_option("--tag", o.run.tags, "tag the run (repeatable)")
      ->check(CLI::Validator([](std::string& tag) { return name_problem(tag, true); }, "TAG"));
  cmd->add_option("--repetitions", o.run.repetitions, "override the suite's repetitions")->check(whole_number_in(1, 1000));
  cmd->add_option("--filter", o.run.filter, "ECMAScript regex searched in model/workload/policy/soc");
  cmd->add_option("--models-dir", o.run.models_dir, "directory of the llama models (default: $KVBENCH_MODELS_DIR, else the repository's models/)");
  cmd->add_option("--l2-dir", o.run.l2_dir,
                  "existing L2 directory for policies that leave l2_dir empty (default: l2/ beside the database, created when a policy offloads)");
  cmd->add_option("--noise-threshold", o.noise_threshold,
                  "replace the suite's noise_threshold: a repetition whose engine threads waited for a core more than this share "
                  "of its wall time is noisy (its wall-time figures are left out of comparisons)")
      ->check(number_in(0.0, 1.0));
  cmd->add_flag("--sim", o.sim,
                "a sim run: count every repetition's engine work under Valgrind's callgrind (clock sim: instructions and "
                "simulated cache misses per span, the same on a busy machine), its host and cpu figures left NULL; as a "
                "suite's \"sim\": true (docs/gate.md)");
  cmd->add_flag("--json", o.json,
                "print {run_id, status, db, cases, skipped, failed, degraded, stored_repetitions, noisy_repetitions, store_writes} as JSON");
  cmd->add_option("--heartbeat", o.run.heartbeat_s,
                  "in a log (stderr not a terminal): a line at least every this many seconds inside a long repetition (0: none)")
      ->check(number_in(0.0, 86400.0))
      ->capture_default_str();
  cmd->add_option("--heartbeat-timeout", o.run.heartbeat_timeout_s,
                  "on a PostgreSQL store: seconds without a heartbeat after which any kvbench takes this run for abandoned "
                  "(marked aborted by the next writer; the run beats four times as often)")
      ->check(whole_number_in(2, 86400))
      ->capture_default_str();
  cmd->add_flag("--fail-on-degraded", o.fail_on_degraded,
                "exit 7 when every case finished but the engine degraded in some (L2 faults or a full L2, memory danger, "
                "requantization, overflow): CI reads a degraded run as a failure");
  cmd->add_flag("--wide", o.wide, "print the summary as one table, however wide (default: fit the terminal, 120 columns in a log)");
  cmd->add_flag("--check", o.run.check_only,
                "make every check a run makes before it starts (suite, models, scripts, sparse budgets, kernel paths, "
                "directories, the database read-only), say which cases would be skipped or degraded, and stop: nothing "
                "is run or written");
  cmd->add_option("--shard", o.shard,
                  "I/N: run only the I-th of N parts of the suite, whole engine-run groups balanced by the case times of the "
                  "suite's previous run (else by each case's size); `kvbench merge` joins the parts into one run");
  cmd->add_option("--soc", o.run.device_soc,
                  "this machine is the SoC of this built-in profile (a board): its measured cases are priced with that profile "
                  "instead of the host calibration, and validate-model and the report set them against it")
      ->check(CLI::Validator(
          [](std::string& name) {
            if (name != "host" && is_builtin_soc(name)) return std::string();
            return "'" + name + "' is not a built-in SoC profile of a device (profiles: " + builtin_soc_names(false) + ")";
          },
          "PROFILE"));
  cmd->add_option("--run-group", o.run.run_group, "with --shard: the name the shards of one run share (tagged run-group=ID)");
  add_db_option(cmd, "--balance-from", o.run.balance_from,
                "with --shard: the database whose previous run of the suite balances the shards (default: --db); every "
                "shard of a group must balance from the same history");
}

}  // namespace

void add_run_command(CLI::App& app, RunCommandOptions& o) {
  auto* cmd = app.add_subcommand("run", "Run a suite and store every figure in the results database");
  cmd->add_option("--suite", o.suite, "built-in suite (smoke, nightly, accuracy, soc-reference, prefix, gate-sim) or a suite JSON file")->capture_default_str();
  add_run_options(cmd, o);
  o.command = cmd;
}

void add_sweep_command(CLI::App& app, RunCommandOptions& o) {
  auto* cmd = app.add_subcommand("sweep",
                                 "Run a suite priced on several SoCs: one engine run per configuration, each SoC pricing it (a SoC "
                                 "that cannot hold what the host run held gets its own run with its capacities)");
  cmd->add_option("--suite", o.suite, "built-in suite (smoke, nightly, accuracy, soc-reference, prefix, gate-sim) or a suite JSON file")->required();
  cmd->add_option("--socs", o.socs, "comma-separated SoC profiles replacing the suite's socs (host and the built-in profiles)")->required();
  add_run_options(cmd, o);
  o.command = cmd;
}

std::vector<std::string> parse_soc_list(const std::string& text) {
  std::vector<std::string> socs;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const std::string soc = text.substr(start, comma - start);
    if (soc.empty()) throw kv::InputError("--socs", text, "an empty SoC name (a comma-separated list, e.g. host,apple-m3)");
    if (!is_builtin_soc(soc)) throw kv::InputError("--socs", soc, "unknown SoC profile (profiles: " + builtin_soc_names() + ")");
    if (std::find(socs.begin(), socs.end(), soc) != socs.end()) throw kv::InputError("--socs", soc, "listed twice");
    socs.push_back(soc);
    start = comma + 1;
  }
  return socs;
}

void add_results_commands(CLI::App& app, ResultsCommandOptions& o) {
  o.list = app.add_subcommand("list", "List what the results database holds (read-only)");
  // Not required by CLI11, whose message would be "what: required": run_list names the choices.
  o.list->add_option("what", o.what, "runs, baselines or acks")->check(CLI::IsMember({"runs", "baselines", "acks"}));
  add_db_option(o.list, "--db", o.db, "results database")->capture_default_str();
  o.list->add_flag("--json", o.json, "print them as a JSON array");
  o.list->add_option("--status", o.status, "runs: only runs with this status")
      ->check(CLI::IsMember({"running", "complete", "failed", "aborted", "interrupted"}));
  o.list->add_option("--suite", o.suite, "runs: only runs of this suite");
  o.list->add_option("--tag", o.tags, "runs: only runs with this tag (repeatable: every one)");
  o.list->add_option("--last", o.last, "runs: only the newest N runs")->check(positive_count());
  o.show = app.add_subcommand("show", "A run's metadata and per-case medians (read-only)");
  o.show->add_option("RUN", o.run_selector, kRunSelectorHelp)->required();
  add_db_option(o.show, "--db", o.db, "results database")->capture_default_str();
  o.show->add_option("--metrics", o.metrics, "comma-separated metric names for the columns (\"all\": every metric)");
  o.show->add_flag("--json", o.json, "print the same medians as JSON");
  o.show->add_flag("--wide", o.wide, "one table, however wide (default: fit the terminal, 120 columns in a log)");
  o.show->add_option("--clock", o.clock,
                     "host: the measured timings (- for a SoC's case of a sweep, never run there); model: the cost model's, "
                     "priced by each case's SoC profile (default: each case's measured timings, the modelled ones of a case "
                     "that has none, marked ^)")
      ->check(CLI::IsMember({"host", "model"}));
  o.exporter = app.add_subcommand("export", "Export a run as JSON (every metric, series and histogram) or CSV (its metrics) (read-only)");
  o.exporter->add_option("RUN", o.run_selector, kRunSelectorHelp)->required();
  add_db_option(o.exporter, "--db", o.db, "results database")->capture_default_str();
  o.exporter->add_option("--format", o.format,
                         "json: the run, its resolved config and metadata, and per case every metric, series and histogram of "
                         "every repetition; csv: the scalar metrics alone (the rows of metric_values)")
      ->check(CLI::IsMember({"json", "csv"}))->capture_default_str();
  o.exporter->add_option("--out", o.out, "output file (default: stdout)");
}

std::string run_json(const RunSummary& s, const RepetitionNoise& noise) {
  return json{{"run_id", s.run_id},   {"status", run_status_name(s.status)},
              {"db", s.db},           {"cases", s.cases},
              {"skipped", s.skipped}, {"failed", s.failed},
              {"degraded", s.degraded}, {"stored_repetitions", s.stored_repetitions},
              {"noisy_repetitions", {{"noisy", noise.noisy}, {"of", noise.repetitions}}},
              {"store_writes", {{"repetitions", s.store_writes.repetitions}, {"seconds", s.store_writes.seconds}, {"clock", "host"}}}}
      .dump();
}

namespace {

// Read by a writer: the run just wrote this database, and a writer's close leaves no -wal/-shm.
void print_summary(const std::string& db, std::int64_t run_id, bool wide, std::FILE* out) {
  ResultsStore store(db);
  const RunView view = load_run_view_measured_or_modelled(store, run_id);
  fmt::print(out, "{}", render_summary(view, run_summary_columns(view), summary_width(out, wide)));
}

}  // namespace

namespace {

// --check: what the run would do, having passed every check.
void print_check(const SuiteConfig& suite, const RunSummary& s, bool as_json) {
  if (as_json) {
    json lines = json::array();
    for (const auto& line : s.lines) lines.push_back({{"case", line.name}, {"status", line.status}, {"note", line.note}});
    fmt::print("{}\n", json{{"suite", suite.name}, {"checked", true}, {"cases", s.cases}, {"skipped", s.skipped},
                            {"degraded", s.degraded}, {"notes", lines}}
                           .dump());
    return;
  }
  fmt::print("suite '{}': {} case{} pass{} every check ({} would be skipped, {} would run degraded); nothing was run or written\n",
             suite.name, s.cases, s.cases == 1 ? "" : "s", s.cases == 1 ? "es" : "", s.skipped, s.degraded);
  for (const auto& line : s.lines) fmt::print("  {} {}: {}\n", line.name, line.status, line.note);
}

}  // namespace

int run_run(const RunCommandOptions& o) {
  SuiteConfig suite = find_suite(o.suite);
  if (!o.socs.empty()) suite.socs = parse_soc_list(o.socs);
  if (o.noise_threshold) suite.noise_threshold = *o.noise_threshold;
  if (o.sim) suite.sim = true;
  InterruptScope interrupts;
  RunOptions options = o.run;
  options.stop = &InterruptScope::flag();
  if (!o.shard.empty()) options.shard = parse_shard(o.shard);
  RunSummary s;
  try {
    s = run_suite(suite, options);
  } catch (const RunInterrupted& e) {
    fmt::print(stderr, "kvbench: {}\n", e.what());
    return kExitInterrupted;
  }
  if (options.check_only) {
    print_check(suite, s, o.json);
    return kExitOk;
  }
  if (o.json) {
    ResultsStore store(s.db);
    fmt::print("{}\n", run_json(s, repetition_noise(store, s.run_id)));
  } else {
    print_summary(s.db, s.run_id, o.wide, stdout);
  }
  std::fflush(stdout);
  if (s.interrupted) {
    const int number = InterruptScope::signal_number();
    fmt::print(stderr,
               "kvbench: interrupted by {}: run {} is marked interrupted in {}; kept {} finished repetition{} of {} case{} "
               "(`kvbench show {} --db {}`); its L2 files are removed\n",
               number == SIGTERM ? "SIGTERM" : "SIGINT", s.run_id, s.db, s.stored_repetitions, s.stored_repetitions == 1 ? "" : "s",
               s.cases, s.cases == 1 ? "" : "s", s.run_id, s.db);
    return kExitInterrupted;
  }
  if (s.status != RunStatus::Complete) return kExitRunFailed;
  if (o.fail_on_degraded && s.degraded > 0) {
    fmt::print(stderr, "kvbench: run {}: {} case{} ran degraded (`kvbench show {} --db {}` says what each gave up); exit {} (--fail-on-degraded)\n",
               s.run_id, s.degraded, s.degraded == 1 ? "" : "s", s.run_id, s.db, kExitDegraded);
    return kExitDegraded;
  }
  return kExitOk;
}

int run_list(const ResultsCommandOptions& o, std::FILE* out) {
  if (o.what.empty()) throw kv::InputError("list", "", "say what to list: runs, baselines or acks (`kvbench list runs`)");
  if (o.what != "runs") {
    // The run filters mean nothing here: refused rather than ignored.
    for (const char* flag : {"--status", "--suite", "--tag", "--last"}) {
      if (o.list->count(flag) > 0) throw kv::InputError(flag, o.what, "filters runs only (`kvbench list runs`)");
    }
  }
  ResultsStore store(o.db, Access::ReadOnly);
  if (o.what == "baselines") {
    print_baselines(store, o.json, out);
    return kExitOk;
  }
  if (o.what == "acks") {
    print_acks(store, o.json, out);
    return kExitOk;
  }
  RunFilter filter;
  filter.status = o.status;
  filter.suite = o.suite;
  filter.tags = o.tags;
  filter.last = o.last;
  const std::vector<RunRecord> runs = list_runs(store, filter);
  if (o.json) {
    json array = json::array();
    for (const RunRecord& r : runs) {
      array.push_back({{"id", r.id},       {"status", r.status}, {"started_at", r.started_at},
                       {"ended_at", r.ended_at.empty() ? json(nullptr) : json(r.ended_at)},
                       {"suite", r.suite}, {"cases", r.cases},   {"tags", r.tags}, {"git_sha", r.git_sha}});
    }
    fmt::print(out, "{}\n", array.dump(2));
    return kExitOk;
  }
  fmt::print(out, "{:>5}  {:<11} {:<20}  {:<20}  {:<12} {:>5}  {:<12}  {}\n", "run", "status", "started", "ended", "suite", "cases",
             "git", "tags");
  for (const RunRecord& r : runs) {
    fmt::print(out, "{:>5}  {:<11} {:<20}  {:<20}  {:<12} {:>5}  {:<12}  {}\n", r.id, r.status, r.started_at, r.ended_at.empty() ? "-" : r.ended_at,
               r.suite, r.cases, r.git_sha, fmt::join(r.tags, ","));
  }
  if (runs.empty()) fmt::print(out, "(no run matches)\n");
  return kExitOk;
}

int run_show(const ResultsCommandOptions& o, std::FILE* out) {
  ResultsStore store(o.db, Access::ReadOnly);
  const std::int64_t run_id = o.run_id > 0 ? o.run_id : resolve_run(store, o.run_selector, "RUN");
  const RunView view = o.clock.empty() ? load_run_view_measured_or_modelled(store, run_id)
                                       : load_run_view(store, run_id, o.clock == "model" ? Clock::Model : Clock::Host);
  const auto columns = o.metrics.empty() ? run_summary_columns(view) : summary_columns(o.metrics);
  fmt::print(out, "{}", o.json ? summary_json(view, columns) + "\n" : render_summary(view, columns, summary_width(out, o.wide)));
  return kExitOk;
}

int run_export(const ResultsCommandOptions& o) {
  ResultsStore store(o.db, Access::ReadOnly);
  const std::int64_t run_id = o.run_id > 0 ? o.run_id : resolve_run(store, o.run_selector, "RUN");
  // A `running` run whose process is gone is exported as aborted, as list and show say.
  const RunRecord run = get_run(store, run_id);
  const std::vector<CaseRecord> cases = load_cases(store, run_id);
  std::ostringstream out;
  if (o.format == "csv") {
    // The rows of metric_values, ordered by case name, repetition and metric.
    out << "run_id,run_status,case_name,model,workload,policy,soc,repetition,name,value,na_reason,unit,clock,extrapolated,noisy\n";
    std::vector<const MetricRow*> rows;
    for (const CaseRecord& c : cases) {
      for (const MetricRow& m : c.metrics) rows.push_back(&m);
    }
    std::stable_sort(rows.begin(), rows.end(), [](const MetricRow* a, const MetricRow* b) {
      return std::tie(a->case_name, a->repetition, a->name) < std::tie(b->case_name, b->repetition, b->name);
    });
    for (const MetricRow* m : rows) {
      out << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n", run.id, run.status, csv_field(m->case_name), csv_field(m->model),
                         csv_field(m->workload), csv_field(m->policy), csv_field(m->soc), m->repetition, csv_field(m->name),
                         m->value ? fmt::format("{:.17g}", *m->value) : "", csv_field(m->na_reason), csv_field(m->unit), m->clock,
                         m->extrapolated ? 1 : 0, m->noisy ? 1 : 0);
    }
  } else {
    json doc{{"run",
              {{"id", run.id},
               {"status", run.status},
               {"started_at", run.started_at},
               {"ended_at", run.ended_at.empty() ? json(nullptr) : json(run.ended_at)},
               {"git_sha", run.git_sha},
               {"git_dirty", run.git_dirty},
               {"config", json::parse(run.config_json)},
               {"config_hash", run.config_hash},
               {"tags", fmt::format("{}", fmt::join(run.tags, ","))},
               {"meta", json::parse(run.meta_json)}}}};
    json cases_json = json::array();
    for (const CaseRecord& c : cases) {
      json metrics_json = json::array();
      for (const MetricRow& m : c.metrics) {
        metrics_json.push_back({{"repetition", m.repetition},
                                {"name", m.name},
                                {"value", m.value ? json(*m.value) : json(nullptr)},
                                {"na_reason", m.na_reason},
                                {"unit", m.unit},
                                {"clock", m.clock},
                                {"extrapolated", m.extrapolated},
                                {"noisy", m.noisy}});
      }
      cases_json.push_back({{"name", c.name},
                            {"model", c.model},
                            {"workload", c.workload},
                            {"policy", c.policy},
                            {"soc", c.soc},
                            {"status", c.status},
                            {"skipped_reason", c.skipped_reason},
                            {"error", c.error},
                            {"metrics", metrics_json},
                            {"series", series_json(store, run.id, c)},
                            {"histograms", histograms_json(store, run.id, c)}});
    }
    doc["cases"] = cases_json;
    out << doc.dump(2) << "\n";
  }
  if (o.out.empty()) {
    fmt::print("{}", out.str());
    return kExitOk;
  }
  // Written beside the target and renamed: never a half-written export.
  const std::string partial = o.out + ".partial";
  {
    std::ofstream file(partial, std::ios::binary);
    file << out.str();
    if (!file.flush()) throw kv::InputError(o.out, "--out", "cannot write");
  }
  std::error_code ec;
  std::filesystem::rename(partial, o.out, ec);
  if (ec) throw kv::InputError(o.out, "--out", "cannot write: " + ec.message());
  return kExitOk;
}

}  // namespace kvbench
