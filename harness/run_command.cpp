#include "run_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sqlite3.h>

#include <signal.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "builtin_suites.h"
#include "case_metrics.h"
#include "cli.h"
#include "degradation.h"
#include "interrupt.h"
#include "results_store.h"
#include "run_view.h"
#include "summary_table.h"
#include "runtime/error.h"

namespace kvbench {

namespace {

using json = nlohmann::json;

// Rows of a query with bound text/integer parameters, as strings (NULL -> nullopt).
using Row = std::vector<std::optional<std::string>>;
std::vector<Row> query(ResultsStore& store, const std::string& sql, const std::vector<std::string>& params = {}) {
  sqlite3_stmt* stmt = nullptr;
  if (sqlite3_prepare_v2(store.db(), sql.c_str(), -1, &stmt, nullptr) != SQLITE_OK) {
    throw std::runtime_error(std::string("sqlite prepare: ") + sqlite3_errmsg(store.db()));
  }
  for (std::size_t i = 0; i < params.size(); ++i) {
    sqlite3_bind_text(stmt, static_cast<int>(i) + 1, params[i].c_str(), -1, SQLITE_TRANSIENT);
  }
  std::vector<Row> rows;
  int rc = 0;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    Row row;
    for (int c = 0; c < sqlite3_column_count(stmt); ++c) {
      if (sqlite3_column_type(stmt, c) == SQLITE_NULL) {
        row.emplace_back(std::nullopt);
      } else if (sqlite3_column_type(stmt, c) == SQLITE_FLOAT) {
        row.emplace_back(fmt::format("{:.17g}", sqlite3_column_double(stmt, c)));
      } else {
        row.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(stmt, c)));
      }
    }
    rows.push_back(std::move(row));
  }
  const std::string error = sqlite3_errmsg(store.db());
  sqlite3_finalize(stmt);
  if (rc != SQLITE_DONE) throw std::runtime_error("sqlite step: " + error);
  return rows;
}

std::string csv_field(const std::optional<std::string>& v) {
  if (!v) return "";
  if (v->find_first_of(",\"\n") == std::string::npos) return *v;
  std::string out = "\"";
  for (char ch : *v) {
    if (ch == '"') out += '"';
    out += ch;
  }
  return out + "\"";
}

json cell(const std::optional<std::string>& v, bool numeric) {
  if (!v) return nullptr;
  if (numeric) return std::stod(*v);
  return *v;
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

void add_run_command(CLI::App& app, RunCommandOptions& o) {
  auto* cmd = app.add_subcommand("run", "Run a suite and store every figure in the results database");
  cmd->add_option("--suite", o.suite, "built-in suite (smoke, nightly, accuracy) or a suite JSON file")->capture_default_str();
  cmd->add_option("--db", o.run.db_path, "results database")->capture_default_str();
  cmd->add_option("--tag", o.run.tags, "tag the run (repeatable)");
  cmd->add_option("--repetitions", o.run.repetitions, "override the suite's repetitions")->check(CLI::Range(1, 1000));
  cmd->add_option("--filter", o.run.filter, "ECMAScript regex searched in model/workload/policy/soc");
  cmd->add_option("--models-dir", o.run.models_dir, "directory of the llama models (default: $KVBENCH_MODELS_DIR, else the repository's models/)");
  cmd->add_option("--l2-dir", o.run.l2_dir,
                  "existing L2 directory for policies that leave l2_dir empty (default: l2/ beside the database, created when a policy offloads)");
  cmd->add_flag("--json", o.json, "print {run_id, status, db, cases, skipped, failed, degraded, stored_repetitions} as JSON");
  o.command = cmd;
}

void add_results_commands(CLI::App& app, ResultsCommandOptions& o) {
  o.list = app.add_subcommand("list", "List what the results database holds (read-only)");
  o.list->add_option("what", o.what, "runs")->required()->check(CLI::IsMember({"runs"}));
  o.list->add_option("--db", o.db, "results database")->capture_default_str();
  o.list->add_flag("--json", o.json, "print the runs as a JSON array");
  o.list->add_option("--status", o.status, "only runs with this status")
      ->check(CLI::IsMember({"running", "complete", "failed", "aborted", "interrupted"}));
  o.list->add_option("--suite", o.suite, "only runs of this suite");
  o.list->add_option("--tag", o.tags, "only runs with this tag (repeatable: every one)");
  o.list->add_option("--last", o.last, "only the newest N runs")->check(CLI::PositiveNumber);
  o.show = app.add_subcommand("show", "A run's metadata and per-case medians (read-only)");
  o.show->add_option("RUN_ID", o.run_id_text, "run id")->required();
  o.show->add_option("--db", o.db, "results database")->capture_default_str();
  o.show->add_option("--metrics", o.metrics, "comma-separated metric names for the columns (\"all\": every metric)");
  o.show->add_flag("--json", o.json, "print the same medians as JSON");
  o.exporter = app.add_subcommand("export", "Export a run's metrics as JSON or CSV (read-only)");
  o.exporter->add_option("RUN_ID", o.run_id_text, "run id")->required();
  o.exporter->add_option("--db", o.db, "results database")->capture_default_str();
  o.exporter->add_option("--format", o.format, "json or csv")->check(CLI::IsMember({"json", "csv"}))->capture_default_str();
  o.exporter->add_option("--out", o.out, "output file (default: stdout)");
}

std::string run_json(const RunSummary& s) {
  return json{{"run_id", s.run_id},   {"status", run_status_name(s.status)},
              {"db", s.db},           {"cases", s.cases},
              {"skipped", s.skipped}, {"failed", s.failed},
              {"degraded", s.degraded}, {"stored_repetitions", s.stored_repetitions}}
      .dump();
}

namespace {

std::int64_t parse_run_id(const std::string& text) {
  std::int64_t id = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (error != std::errc() || end != text.data() + text.size() || id < 1) {
    throw kv::InputError("RUN_ID", text, "not a run id (a positive integer; `kvbench list runs` shows them)");
  }
  return id;
}

// Read by a writer: the run just wrote this database, and a writer's close leaves no -wal/-shm.
void print_summary(const std::string& db, std::int64_t run_id, std::FILE* out) {
  ResultsStore store(db);
  fmt::print(out, "{}", render_summary(load_run_view(store, run_id), default_summary_columns()));
}

}  // namespace

int run_run(const RunCommandOptions& o) {
  const SuiteConfig suite = find_suite(o.suite);
  InterruptScope interrupts;
  RunOptions options = o.run;
  options.stop = &InterruptScope::flag();
  RunSummary s;
  try {
    s = run_suite(suite, options);
  } catch (const RunInterrupted& e) {
    fmt::print(stderr, "kvbench: {}\n", e.what());
    return kExitInterrupted;
  }
  if (o.json) {
    fmt::print("{}\n", run_json(s));
  } else {
    print_summary(s.db, s.run_id, stdout);
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
  return s.status == RunStatus::Complete ? kExitOk : kExitRunFailed;
}

int run_list(const ResultsCommandOptions& o, std::FILE* out) {
  ResultsStore store(o.db, Access::ReadOnly);
  const auto rows = query(store,
                          "SELECT r.id, r.status, r.pid, r.boot_id, r.started_at, coalesce(r.ended_at, ''), r.tags,"
                          " coalesce(json_extract(r.meta_json, '$.suite'), ''), r.git_sha,"
                          " (SELECT count(*) FROM cases c WHERE c.run_id = r.id) FROM runs r ORDER BY r.id");
  struct Listed {
    std::int64_t id;
    std::string status, started, ended, suite, git_sha;
    std::vector<std::string> tags;
    int cases;
  };
  std::vector<Listed> runs;
  for (const Row& r : rows) {
    Listed l{std::stoll(*r[0]), reported_run_status(*r[1], std::stoll(*r[2]), *r[3]), *r[4], *r[5], *r[7], *r[8], {}, std::stoi(*r[9])};
    std::stringstream tags(*r[6]);
    for (std::string tag; std::getline(tags, tag, ',');) l.tags.push_back(tag);
    const auto has = [&](const std::string& tag) { return std::find(l.tags.begin(), l.tags.end(), tag) != l.tags.end(); };
    if (!o.status.empty() && l.status != o.status) continue;
    if (!o.suite.empty() && l.suite != o.suite) continue;
    if (!std::all_of(o.tags.begin(), o.tags.end(), has)) continue;
    runs.push_back(std::move(l));
  }
  if (o.last > 0 && runs.size() > static_cast<std::size_t>(o.last)) runs.erase(runs.begin(), runs.end() - o.last);
  if (o.json) {
    json array = json::array();
    for (const Listed& l : runs) {
      array.push_back({{"id", l.id},       {"status", l.status}, {"started_at", l.started},
                       {"ended_at", l.ended.empty() ? json(nullptr) : json(l.ended)},
                       {"suite", l.suite}, {"cases", l.cases},   {"tags", l.tags}, {"git_sha", l.git_sha}});
    }
    fmt::print(out, "{}\n", array.dump(2));
    return kExitOk;
  }
  fmt::print(out, "{:>5}  {:<11} {:<20}  {:<20}  {:<12} {:>5}  {:<12}  {}\n", "run", "status", "started", "ended", "suite", "cases",
             "git", "tags");
  for (const Listed& l : runs) {
    fmt::print(out, "{:>5}  {:<11} {:<20}  {:<20}  {:<12} {:>5}  {:<12}  {}\n", l.id, l.status, l.started, l.ended.empty() ? "-" : l.ended,
               l.suite, l.cases, l.git_sha, fmt::join(l.tags, ","));
  }
  if (runs.empty()) fmt::print(out, "(no run matches)\n");
  return kExitOk;
}

int run_show(const ResultsCommandOptions& o, std::FILE* out) {
  const std::int64_t run_id = o.run_id > 0 ? o.run_id : parse_run_id(o.run_id_text);
  const auto columns = o.metrics.empty() ? default_summary_columns() : summary_columns(o.metrics);
  ResultsStore store(o.db, Access::ReadOnly);
  const RunView view = load_run_view(store, run_id);
  fmt::print(out, "{}", o.json ? summary_json(view, columns) + "\n" : render_summary(view, columns));
  return kExitOk;
}

int run_export(const ResultsCommandOptions& o) {
  const std::int64_t run_id = o.run_id > 0 ? o.run_id : parse_run_id(o.run_id_text);
  ResultsStore store(o.db, Access::ReadOnly);
  // Names a missing run; a `running` run whose process is gone is exported as aborted.
  const std::string status = load_run_view(store, run_id).status;
  const std::string id = std::to_string(run_id);
  std::ostringstream out;
  const auto metrics = query(store,
                             "SELECT run_id, run_status, case_name, model, workload, policy, soc, repetition, name, value,"
                             " na_reason, unit, clock, extrapolated, noisy FROM metric_values WHERE run_id = ?"
                             " ORDER BY case_name, repetition, name",
                             {id});
  static const char* const kColumns[] = {"run_id", "run_status", "case_name", "model", "workload", "policy", "soc", "repetition",
                                         "name", "value", "na_reason", "unit", "clock", "extrapolated", "noisy"};
  if (o.format == "csv") {
    for (std::size_t i = 0; i < std::size(kColumns); ++i) out << (i ? "," : "") << kColumns[i];
    out << "\n";
    for (const Row& r : metrics) {
      for (std::size_t i = 0; i < r.size(); ++i) out << (i ? "," : "") << csv_field(i == 1 ? std::optional<std::string>(status) : r[i]);
      out << "\n";
    }
  } else {
    const Row run = query(store,
                          "SELECT id, status, started_at, ended_at, git_sha, git_dirty, config_json, config_hash, tags, meta_json"
                          " FROM runs WHERE id = ?",
                          {id})[0];
    json doc{{"run",
              {{"id", std::stoll(*run[0])},
               {"status", status},
               {"started_at", *run[2]},
               {"ended_at", cell(run[3], false)},
               {"git_sha", *run[4]},
               {"git_dirty", *run[5] == "1"},
               {"config", json::parse(*run[6])},
               {"config_hash", *run[7]},
               {"tags", *run[8]},
               {"meta", json::parse(*run[9])}}}};
    json cases = json::array();
    for (const Row& c : query(store,
                              "SELECT id, name, model, workload, policy, soc, status, skipped_reason, error FROM cases"
                              " WHERE run_id = ? ORDER BY id",
                              {id})) {
      json metrics_json = json::array();
      for (const Row& m : query(store,
                                "SELECT repetition, name, value, na_reason, unit, clock, extrapolated, noisy FROM metrics"
                                " WHERE case_id = ? ORDER BY repetition, name",
                                {*c[0]})) {
        metrics_json.push_back({{"repetition", std::stoi(*m[0])},
                                {"name", *m[1]},
                                {"value", cell(m[2], true)},
                                {"na_reason", *m[3]},
                                {"unit", *m[4]},
                                {"clock", *m[5]},
                                {"extrapolated", *m[6] == "1"},
                                {"noisy", *m[7] == "1"}});
      }
      cases.push_back({{"name", *c[1]},
                       {"model", *c[2]},
                       {"workload", *c[3]},
                       {"policy", *c[4]},
                       {"soc", *c[5]},
                       {"status", *c[6]},
                       {"skipped_reason", *c[7]},
                       {"error", *c[8]},
                       {"metrics", metrics_json}});
    }
    doc["cases"] = cases;
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
