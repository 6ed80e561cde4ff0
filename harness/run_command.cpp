#include "run_command.h"

#include <fmt/format.h>
#include <sqlite3.h>

#include <algorithm>
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
#include "results_store.h"
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

// Reading tools open an existing database only: a typo must not create an empty one.
void require_db(const std::string& path) {
  if (!std::filesystem::exists(path)) throw kv::InputError(path, "--db", "no such database (run `kvbench run` first)");
}

void require_run(ResultsStore& store, std::int64_t run_id) {
  if (query(store, "SELECT id FROM runs WHERE id = ?", {std::to_string(run_id)}).empty()) {
    throw kv::InputError(store.path(), "RUN_ID", fmt::format("no run {} in this database", run_id));
  }
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
  cmd->add_option("--models-dir", o.run.models_dir, "directory of the llama models (default: $KVBENCH_MODELS_DIR, else ../shared/models)");
  cmd->add_option("--l2-dir", o.run.l2_dir, "L2 directory for policies that leave l2_dir empty (default: beside the database)");
  cmd->add_flag("--json", o.json, "print {run_id, status, db, cases, skipped, failed} as JSON");
  o.command = cmd;
}

void add_results_commands(CLI::App& app, ResultsCommandOptions& o) {
  o.list = app.add_subcommand("list", "List what the results database holds");
  o.list->add_option("what", o.what, "runs")->required()->check(CLI::IsMember({"runs"}));
  o.list->add_option("--db", o.db, "results database")->capture_default_str();
  o.show = app.add_subcommand("show", "A run's metadata and per-case medians");
  o.show->add_option("RUN_ID", o.run_id, "run id")->required();
  o.show->add_option("--db", o.db, "results database")->capture_default_str();
  o.exporter = app.add_subcommand("export", "Export a run's metrics as JSON or CSV");
  o.exporter->add_option("RUN_ID", o.run_id, "run id")->required();
  o.exporter->add_option("--db", o.db, "results database")->capture_default_str();
  o.exporter->add_option("--format", o.format, "json or csv")->check(CLI::IsMember({"json", "csv"}))->capture_default_str();
  o.exporter->add_option("--out", o.out, "output file (default: stdout)");
}

std::string run_json(const RunSummary& s) {
  return json{{"run_id", s.run_id},   {"status", run_status_name(s.status)},
              {"db", s.db},           {"cases", s.cases},
              {"skipped", s.skipped}, {"failed", s.failed},
              {"degraded", s.degraded}}
      .dump();
}

int run_run(const RunCommandOptions& o) {
  const SuiteConfig suite = find_suite(o.suite);
  const RunSummary s = run_suite(suite, o.run);
  if (o.json) {
    fmt::print("{}\n", run_json(s));
  } else {
    ResultsCommandOptions show;
    show.db = s.db;
    show.run_id = s.run_id;
    run_show(show);
    for (const auto& line : s.lines) {
      if (line.status != "complete") fmt::print("  {} {}: {}\n", line.status, line.name, line.note);
    }
  }
  return s.status == RunStatus::Complete ? kExitOk : kExitRunFailed;
}

int run_list(const ResultsCommandOptions& o) {
  require_db(o.db);
  ResultsStore store(o.db);
  const auto rows = query(store,
                          "SELECT r.id, r.status, r.started_at, coalesce(r.ended_at, ''), r.tags, json_extract(r.meta_json, '$.suite'),"
                          " (SELECT count(*) FROM cases c WHERE c.run_id = r.id) FROM runs r ORDER BY r.id");
  fmt::print("{:>6}  {:<9} {:<21} {:<21} {:<10} {:>5}  {}\n", "run", "status", "started", "ended", "suite", "cases", "tags");
  for (const Row& r : rows) {
    fmt::print("{:>6}  {:<9} {:<21} {:<21} {:<10} {:>5}  {}\n", r[0].value_or(""), r[1].value_or(""), r[2].value_or(""),
               r[3].value_or(""), r[5].value_or(""), r[6].value_or(""), r[4].value_or(""));
  }
  return kExitOk;
}

int run_show(const ResultsCommandOptions& o, std::FILE* out) {
  require_db(o.db);
  ResultsStore store(o.db);
  require_run(store, o.run_id);
  const std::string id = std::to_string(o.run_id);
  const Row run = query(store,
                        "SELECT status, started_at, coalesce(ended_at, ''), git_sha, git_dirty, config_hash, tags,"
                        " json_extract(meta_json, '$.suite'), json_extract(meta_json, '$.cpu_model'),"
                        " json_extract(meta_json, '$.cores'), json_extract(meta_json, '$.l2_fs_type') FROM runs WHERE id = ?",
                        {id})[0];
  fmt::print(out, "run {} [{}] suite {}  {} -> {}\n  git {}{}  config {}  tags [{}]\n  {} ({} cores), L2 on {}\n", o.run_id,
             run[0].value_or(""), run[7].value_or(""), run[1].value_or(""), run[2].value_or(""), run[3].value_or(""),
             run[4].value_or("0") == "1" ? " (dirty)" : "", run[5].value_or(""), run[6].value_or(""), run[8].value_or(""),
             run[9].value_or(""), run[10].value_or(""));
  // Medians over repetitions of the headline figures; * marks extrapolated, ~ noisy, ! degraded.
  struct Column {
    std::string metric, label;
    double divisor = 1.0;  // shown in label's unit
  };
  const std::vector<Column> columns = {{"ttft_ms", "ttft ms"},           {"prefill_tps", "pre tok/s"},
                                       {"tpot_ms_p50", "tpot p50"},      {"decode_tps", "tok/s"},
                                       {"kv_bytes_per_token", "B/tok"},  {"token_drop_ratio", "drop"},
                                       {"attn_mass_recall", "recall"},   {"ppl_delta_pct", "ppl d%"},
                                       {"peak_l1_bytes", "L1 MiB", 1024.0 * 1024.0}};
  fmt::print(out, "\n{:<52}", "case");
  for (const auto& c : columns) fmt::print(out, " {:>10}", c.label);
  fmt::print(out, "\n");
  const auto cases = query(store, "SELECT id, name, status FROM cases WHERE run_id = ? ORDER BY id", {id});
  std::vector<std::pair<std::string, std::vector<std::string>>> degraded;
  for (const Row& c : cases) {
    // Degradation: the counts and the events that explain them, per repetition.
    std::map<int, std::map<std::string, double>> counts;
    for (const Row& r : query(store,
                              "SELECT repetition, name, value FROM metrics WHERE case_id = ? AND value IS NOT NULL AND"
                              " name IN ('l2_errors', 'pressure_danger_steps', 'requantized_pages', 'l1_overflow_events')",
                              {*c[0]})) {
      counts[std::stoi(*r[0])][*r[1]] = std::stod(*r[2]);
    }
    std::map<int, std::vector<EventRecord>> events;
    for (const Row& r : query(store,
                              "SELECT repetition, step, kind, detail FROM events WHERE case_id = ? AND kind IN"
                              " ('l2_failed', 'l2_full', 'budget_change', 'requantized', 'l1_overflow') ORDER BY rowid",
                              {*c[0]})) {
      events[std::stoi(*r[0])].push_back({std::stoll(*r[1]), *r[2], *r[3]});
    }
    std::vector<std::string> lines;
    int degraded_reps = 0;
    for (const auto& [repetition, rep_counts] : counts) {
      const auto rep_lines = degradation_lines(rep_counts, events[repetition]);
      if (rep_lines.empty()) continue;
      if (degraded_reps++ == 0) lines = rep_lines;
    }
    const std::string name = c[1].value_or("") + (lines.empty() ? "" : " !");
    fmt::print(out, "{:<52}", name.size() > 52 ? name.substr(name.size() - 52) : name);
    if (!lines.empty()) {
      lines.push_back(fmt::format("in {} of {} repetitions", degraded_reps, counts.size()));
      degraded.emplace_back(c[1].value_or(""), lines);
    }
    if (c[2].value_or("") != "complete") {
      fmt::print(out, " {}\n", c[2].value_or(""));
      continue;
    }
    for (const auto& column : columns) {
      const auto values = query(store, "SELECT value, extrapolated, noisy FROM metrics WHERE case_id = ? AND name = ?",
                                {*c[0], column.metric});
      std::vector<double> v;
      bool extrapolated = false, noisy = false;
      for (const Row& r : values) {
        if (r[0]) v.push_back(std::stod(*r[0]));
        extrapolated = extrapolated || r[1].value_or("0") == "1";
        noisy = noisy || r[2].value_or("0") == "1";
      }
      if (v.empty()) {
        fmt::print(out, " {:>10}", "-");
        continue;
      }
      const double median = percentile(v, 50.0) / column.divisor;
      const std::string mark = std::string(extrapolated ? "*" : "") + (noisy ? "~" : "");
      fmt::print(out, " {:>10}", fmt::format("{:.4g}{}", median, mark));
    }
    fmt::print(out, "\n");
  }
  fmt::print(out, "\nmedians over repetitions; * extrapolated (sampled layers or probed prefill), ~ noisy, ! degraded (below)\n");
  std::string host, exact;
  for (const auto& column : columns) {
    std::string& list = metric(column.metric).clock == Clock::Host ? host : exact;
    list += (list.empty() ? "" : ", ") + column.label;
  }
  fmt::print(out, "clocks: host {}; exact {}\n", host, exact);
  fmt::print(out, "synthetic backend: ttft, tpot and tok/s time the engine's work for every layer (KV append, quantization,\n"
             "  pages, selection, attention), not model compute; quality checks are never inside a timed figure\n");
  for (const auto& [name, lines] : degraded) {
    fmt::print(out, "degraded {}:\n", name);
    for (const std::string& line : lines) fmt::print(out, "  {}\n", line);
  }
  return kExitOk;
}

int run_export(const ResultsCommandOptions& o) {
  require_db(o.db);
  ResultsStore store(o.db);
  require_run(store, o.run_id);
  const std::string id = std::to_string(o.run_id);
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
      for (std::size_t i = 0; i < r.size(); ++i) out << (i ? "," : "") << csv_field(r[i]);
      out << "\n";
    }
  } else {
    const Row run = query(store,
                          "SELECT id, status, started_at, ended_at, git_sha, git_dirty, config_json, config_hash, tags, meta_json"
                          " FROM runs WHERE id = ?",
                          {id})[0];
    json doc{{"run",
              {{"id", std::stoll(*run[0])},
               {"status", *run[1]},
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
