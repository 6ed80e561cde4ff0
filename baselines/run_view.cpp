#include "run_view.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "degradation.h"
#include "statistics.h"
#include "runtime/error.h"
#include "sql_query.h"

namespace kvbench {

namespace {

void load_header(ResultsStore& store, RunView& view) {
  Query q(store, "SELECT r.status, r.started_at, coalesce(r.ended_at, ''), r.git_sha, r.git_dirty, r.config_hash, r.tags, r.meta_json,"
                 " r.config_json, " + run_writer_sql(store.connection().dialect(), "r") + " FROM runs r WHERE r.id = ?");
  q.bind(1, view.id);
  if (!q.step()) throw kv::InputError(store.path(), "RUN_ID", fmt::format("no run {} in this database", view.id));
  view.status = reported_run_status(q.text(0), run_writer_at(q, 9), store.on_server());
  view.started_at = q.text(1);
  view.ended_at = q.text(2);
  view.git_sha = q.text(3);
  view.git_dirty = q.int64(4) != 0;
  view.config_hash = q.text(5);
  view.tags = q.text(6);
  const auto meta = nlohmann::json::parse(q.text(7), nullptr, false);
  const auto config = nlohmann::json::parse(q.text(8), nullptr, false);
  if (meta.is_object()) {
    view.suite = meta.value("suite", "");
    view.cpu_model = meta.value("cpu_model", "");
    view.board = meta.value("board", "");
    view.device_soc = meta.value("device_soc", "");
    view.cores = meta.value("cores", 0);
    view.l2_fs_type = meta.value("l2_fs_type", "");
    view.planned_repetitions = meta.value("repetitions", 0);
    view.prefix_cache_start = meta.value("prefix_cache_start", "cold");
    view.sim = meta.contains("sim");
  }
  if (config.is_object()) {
    view.noise_threshold = config.value("noise_threshold", 0.0);
    if (config.contains("models") && config["models"].is_array()) {
      for (const auto& m : config["models"]) view.synthetic = view.synthetic || (m.is_object() && m.value("backend", "") == "synthetic");
    }
  }
}

// Which stored rows a view on `timing` shows: on the host view every name on its own clock; on
// the model view the modelled figures and the exact ones.
bool shown(const std::string& name, const std::string& clock_text, Clock timing) {
  const MetricDef* def = find_metric(name);
  const Clock clock = parse_clock(clock_text).value_or(Clock::Exact);
  if (timing == Clock::Model) return clock == Clock::Model || clock == Clock::Exact;
  return def == nullptr || def->clock == clock;
}

void load_figures(ResultsStore& store, std::int64_t case_id, CaseView& c, Clock timing) {
  struct Values {
    std::vector<double> values;
    CaseFigure figure;
  };
  std::map<std::string, Values> by_name;
  std::map<int, std::map<std::string, double>> degradation_counts;  // repetition -> counts
  std::map<int, bool> repetitions;
  Query q(store,
          "SELECT repetition, name, value, na_reason, extrapolated, noisy, clock FROM metrics WHERE case_id = ? ORDER BY repetition");
  q.bind(1, case_id);
  const auto& degradation_names = degradation_metric_names();
  while (q.step()) {
    const int repetition = static_cast<int>(q.int64(0));
    repetitions[repetition] = true;
    if (!shown(q.text(1), q.text(6), timing)) continue;
    Values& v = by_name[q.text(1)];
    if (!q.null(2)) {
      v.values.push_back(q.real(2));
      if (std::find(degradation_names.begin(), degradation_names.end(), q.text(1)) != degradation_names.end()) {
        degradation_counts[repetition][q.text(1)] = q.real(2);
      }
    } else if (v.figure.na_reason.empty()) {
      v.figure.na_reason = q.text(3);
    }
    v.figure.extrapolated = v.figure.extrapolated || q.int64(4) != 0;
    v.figure.noisy = v.figure.noisy || q.int64(5) != 0;
  }
  c.repetitions = static_cast<int>(repetitions.size());
  for (auto& [name, v] : by_name) {
    if (!v.values.empty()) v.figure.median = median(v.values);
    c.figures[name] = v.figure;
  }
  // Degradation in plain words: the first degraded repetition's lines, and how many were.
  std::map<int, std::vector<RunEvent>> events;
  std::string kinds;  // the degradation kinds' names, for SQL
  for (EventKind kind : degradation_event_kinds()) kinds += (kinds.empty() ? "'" : ", '") + std::string(event_kind_name(kind)) + "'";
  Query e(store, "SELECT repetition, step, kind, " + store.event_data_sql("events") + " FROM events WHERE case_id = ? AND kind IN (" +
                     kinds + ") ORDER BY rowid");
  e.bind(1, case_id);
  while (e.step()) events[static_cast<int>(e.int64(0))].push_back(parse_event(e.text(2), e.int64(1), e.text(3)));
  for (const auto& [repetition, counts] : degradation_counts) {
    const auto lines = degradation_lines(counts, events[repetition]);
    if (lines.empty()) continue;
    if (c.degraded_repetitions++ == 0) c.degradation = lines;
  }
  // Pricing notes are the same in every repetition: the first one's.
  Query notes(store, "SELECT step, kind, " + store.event_data_sql("events") + " FROM events WHERE case_id = ? AND kind IN ('" +
                         std::string(event_kind_name(EventKind::CapacityRerun)) + "', '" + std::string(event_kind_name(EventKind::DoesNotFit)) +
                         "') AND repetition = "
                         "(SELECT MIN(repetition) FROM events WHERE case_id = ?) ORDER BY rowid");
  notes.bind(1, case_id);
  notes.bind(2, case_id);
  while (notes.step()) c.pricing.push_back(parse_event(notes.text(1), notes.int64(0), notes.text(2)).text);
}

}  // namespace

RunView load_run_view(ResultsStore& store, std::int64_t run_id, Clock timing) {
  RunView view;
  view.id = run_id;
  view.timing = timing;
  load_header(store, view);
  Query q(store, "SELECT id, name, model, workload, policy, soc, status, skipped_reason, error FROM cases WHERE run_id = ? ORDER BY id");
  q.bind(1, run_id);
  std::vector<std::int64_t> ids;
  while (q.step()) {
    CaseView c;
    ids.push_back(q.int64(0));
    c.name = q.text(1);
    c.model = q.text(2);
    c.workload = q.text(3);
    c.policy = q.text(4);
    c.soc = q.text(5);
    c.status = q.text(6);
    c.note = c.status == "skipped" ? q.text(7) : q.text(8);
    view.cases.push_back(std::move(c));
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    view.cases[i].timing = timing;
    load_figures(store, ids[i], view.cases[i], timing);
  }
  return view;
}

namespace {

// A case of a host view holds a figure of this machine's work: a row on the host, cpu or sim
// clock (NULL ones included: a sim run stores its host figures NULL). The host view shows a
// name only on its own clock, so a figure whose metric is on such a clock is such a row.
bool measured(const CaseView& c) {
  return std::any_of(c.figures.begin(), c.figures.end(), [](const auto& figure) {
    const MetricDef* def = find_metric(figure.first);
    return def != nullptr && host_work(def->clock);
  });
}

}  // namespace

RunView load_run_view_measured_or_modelled(ResultsStore& store, std::int64_t run_id) {
  RunView host = load_run_view(store, run_id, Clock::Host);
  std::vector<std::size_t> unmeasured;
  bool any_measured = false;
  for (std::size_t i = 0; i < host.cases.size(); ++i) {
    if (host.cases[i].repetitions == 0) continue;  // nothing stored: no figure on any clock
    if (measured(host.cases[i])) {
      any_measured = true;
    } else {
      unmeasured.push_back(i);
    }
  }
  if (unmeasured.empty()) return host;
  RunView model = load_run_view(store, run_id, Clock::Model);
  if (!any_measured) return model;
  for (const std::size_t i : unmeasured) {
    host.cases[i].figures = std::move(model.cases[i].figures);
    host.cases[i].timing = Clock::Model;
  }
  return host;
}

bool mixed_timings(const RunView& run) {
  return run.timing == Clock::Host &&
         std::any_of(run.cases.begin(), run.cases.end(), [](const CaseView& c) { return c.timing == Clock::Model; });
}

}  // namespace kvbench
