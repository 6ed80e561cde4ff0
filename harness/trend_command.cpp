#include "trend_command.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "change_points.h"
#include "cli.h"
#include "cli_checks.h"
#include "human_units.h"
#include "metric_table.h"
#include "results_reader.h"
#include "run_comparison.h"
#include "runtime/error.h"
#include "statistics.h"

namespace kvbench {

namespace {

struct Point {
  const RunRecord* run;
  double median;
  // What of the case's configuration differs from the case's previous run in the history
  // (case_config_changes); empty for the first.
  std::vector<std::string> config_changes;
};

}  // namespace

void add_trend_command(CLI::App& app, TrendOptions& o) {
  o.command = app.add_subcommand("trend", "A metric's per-run medians across a suite's complete runs, with change points");
  o.command->add_option("--metric", o.metric, "the metric (`kvbench metrics`; NAME@model for the modelled figure)")->required();
  o.command->add_option("--case", o.case_glob, "cases, a glob over model/workload/policy/soc")->capture_default_str();
  o.command->add_option("--suite", o.suite, "the suite (default: that of the newest complete run)");
  o.command->add_option("--last", o.last, "only the newest N runs")->check(positive_count());
  o.command->add_option("--format", o.format, "table or json")->check(CLI::IsMember({"table", "json"}))->capture_default_str();
  add_db_option(o.command, "--db", o.db, "results database")->capture_default_str();
}

namespace {

// The suite's complete runs (the newest's suite where none is named) and, per case the glob
// takes, the metric's median over each run's quiet repetitions (all of them when none is quiet).
struct TrendHistory {
  std::string suite;
  std::vector<RunRecord> runs;
  std::map<std::string, std::vector<Point>> points;  // by case; Point::run points into runs
};

TrendHistory trend_history(ResultsStore& store, const TrendOptions& o, const std::string& key) {
  TrendHistory h;
  RunFilter filter;
  filter.status = "complete";
  filter.suite = o.suite;
  if (filter.suite.empty()) {
    const auto all = list_runs(store, filter);
    if (all.empty()) throw kv::InputError(o.db, "--suite", "no complete run in this database");
    filter.suite = all.back().suite;
  }
  filter.last = o.last;
  h.suite = filter.suite;
  h.runs = list_runs(store, filter);
  if (h.runs.empty()) throw kv::InputError("--suite", filter.suite, "no complete run of this suite");
  for (const RunRecord& run : h.runs) {
    for (const CaseSamples& c : load_samples(store, run.id)) {
      if (::fnmatch(o.case_glob.c_str(), c.name.c_str(), 0) != 0) continue;
      const auto it = c.samples.find(key);
      if (it == c.samples.end()) continue;
      std::vector<Point>& points = h.points[c.name];
      std::vector<std::string> changes = points.empty() ? std::vector<std::string>{} : case_config_changes(*points.back().run, run, c);
      points.push_back({&run, quiet_median(it->second), std::move(changes)});
    }
  }
  if (h.points.empty()) {
    throw kv::InputError("--case", o.case_glob, fmt::format("no case of suite '{}' has values of {}", h.suite, o.metric));
  }
  return h;
}

// A run's tags as the table shows them: comma-separated, "-" for none.
std::string tags_text(const RunRecord& run) { return run.tags.empty() ? "-" : fmt::format("{}", fmt::join(run.tags, ",")); }

// The line under a case's rows for a run marked `*`: what of the case's configuration differs
// from the run before it, the first few changes and how to see the rest.
std::string config_footnote(const RunRecord& before, const RunRecord& run, const std::vector<std::string>& changes) {
  constexpr std::size_t kShown = 3;
  std::string shown;
  for (std::size_t i = 0; i < std::min(kShown, changes.size()); ++i) shown += (i == 0 ? "" : "; ") + changes[i];
  const std::string more = changes.size() > kShown ? fmt::format(" (and {} more: `kvbench compare --baseline {} --candidate {}`)",
                                                                 changes.size() - kShown, before.id, run.id)
                                                   : "";
  return fmt::format("  * run {}: the case's configuration differs from run {}'s: {}{}\n", run.id, before.id, shown, more);
}

}  // namespace

int run_trend(const TrendOptions& o) {
  const std::optional<MetricKey> parsed = parse_metric_key(o.metric);
  const MetricDef* def = parsed ? find_metric(parsed->name) : nullptr;
  if (def == nullptr) {
    throw kv::InputError("--metric", o.metric, "not a metric (`kvbench metrics` lists them; NAME@model for a modelled figure)");
  }
  const std::string key = metric_key(parsed->name, parsed->clock);
  // The change points are stored when the database can be written; reading never needs it.
  std::unique_ptr<ResultsStore> store;
  bool writable = true;
  try {
    store = std::make_unique<ResultsStore>(o.db);
  } catch (const kv::InputError&) {
    store = std::make_unique<ResultsStore>(o.db, Access::ReadOnly);
    writable = false;
  }
  const TrendHistory trend = trend_history(*store, o, key);
  const std::vector<RunRecord>& runs = trend.runs;
  const std::map<std::string, std::vector<Point>>& history = trend.points;
  const ChangePointOptions options;
  nlohmann::json doc = nlohmann::json::array();
  std::string table = fmt::format("{} ({}, {} clock) across {} complete runs of suite {}; change points: E-divisive means, "
                                  "permutation p <= {}, at least {} runs on each side\n",
                                  key, def->unit, clock_name(parsed->clock), runs.size(), trend.suite, options.significance,
                                  options.min_segment);
  for (const auto& [name, points] : history) {
    std::vector<double> series;
    for (const Point& p : points) series.push_back(p.median);
    const std::vector<ChangePoint> changes = find_change_points(series, options);
    std::vector<ResultsStore::ChangePointRecord> stored;
    std::map<int, const ChangePoint*> at;
    for (const ChangePoint& c : changes) {
      at[c.index] = &c;
      stored.push_back({points[static_cast<std::size_t>(c.index)].run->id, c.before, c.after, fmt::format("p={}", significant(c.p, 2))});
    }
    if (writable) store->replace_change_points(name, key, stored);
    table += fmt::format("\n{}\n", name);
    std::size_t tags_width = 4;
    for (const Point& p : points) tags_width = std::max(tags_width, tags_text(*p.run).size());
    nlohmann::json rows = nlohmann::json::array();
    std::string footnotes;
    for (std::size_t i = 0; i < points.size(); ++i) {
      const RunRecord& run = *points[i].run;
      std::string mark;
      if (const auto it = at.find(static_cast<int>(i)); it != at.end()) {
        const ChangePoint& c = *it->second;
        mark = fmt::format("  <- change: {} -> {} ({:+.1f}%, p={})", human_value(c.before, def->unit), human_value(c.after, def->unit),
                           c.before != 0.0 ? (c.after / c.before - 1.0) * 100.0 : 0.0, significant(c.p, 2));
      }
      const bool changed = !points[i].config_changes.empty();
      if (changed) footnotes += config_footnote(*points[i - 1].run, run, points[i].config_changes);
      std::string line = fmt::format("  run {:>5}{} {}  {:<12}  {:>10}  {:<{}}{}", run.id, changed ? "*" : " ", run.started_at, run.git_sha,
                                     human_value(points[i].median, def->unit), tags_text(run), tags_width, mark);
      while (line.back() == ' ') line.pop_back();
      table += line + "\n";
      rows.push_back({{"run_id", run.id}, {"started_at", run.started_at}, {"git_sha", run.git_sha}, {"tags", run.tags},
                      {"median", points[i].median}, {"change_point", at.count(static_cast<int>(i)) > 0},
                      {"config_changes", points[i].config_changes}});
    }
    table += footnotes;
    nlohmann::json cps = nlohmann::json::array();
    for (const ChangePoint& c : changes) {
      cps.push_back({{"run_id", points[static_cast<std::size_t>(c.index)].run->id}, {"before", c.before}, {"after", c.after}, {"p", c.p}});
    }
    doc.push_back({{"case", name}, {"metric", key}, {"unit", def->unit}, {"runs", rows}, {"change_points", cps}});
  }
  if (!writable) table += "\n(the database is read-only: change points were not stored)\n";
  fmt::print("{}", o.format == "json" ? doc.dump(2) + "\n" : table);
  return kExitOk;
}

}  // namespace kvbench
