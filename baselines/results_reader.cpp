#include "results_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <sstream>

#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "sql_query.h"
#include "store_schema.h"

namespace kvbench {

namespace {



std::string run_columns(ResultsStore& store) {
  const SqlDialect d = store.connection().dialect();
  return "SELECT r.id, r.status, " + run_writer_sql(d, "r") + ", r.started_at, coalesce(r.ended_at, ''), r.tags, coalesce(" +
         json_text_sql(d, "r.meta_json", "suite") +
         ", ''), r.git_sha, r.git_dirty, r.config_hash, r.config_json, r.meta_json,"
         " (SELECT count(*) FROM cases c WHERE c.run_id = r.id) FROM runs r";
}

RunRecord run_of(const Query& q, bool on_server) {
  RunRecord r;
  r.id = q.int64(0);
  r.status = reported_run_status(q.text(1), run_writer_at(q, 2), on_server);
  r.started_at = q.text(6);
  r.ended_at = q.text(7);
  r.tags = split_tags(q.text(8));
  r.suite = q.text(9);
  r.git_sha = q.text(10);
  r.git_dirty = q.int64(11) != 0;
  r.config_hash = q.text(12);
  r.config_json = q.text(13);
  r.meta_json = q.text(14);
  r.cases = static_cast<int>(q.int64(15));
  return r;
}

}  // namespace

std::string run_meta_text(const RunRecord& run, const char* key) {
  const nlohmann::json meta = nlohmann::json::parse(run.meta_json, nullptr, false);
  return meta.is_object() && meta.contains(key) && meta[key].is_string() ? meta[key].get<std::string>() : "";
}

std::vector<RunRecord> list_runs(ResultsStore& store, const RunFilter& filter) {
  Query q(store, run_columns(store) + " ORDER BY r.id");
  std::vector<RunRecord> runs;
  while (q.step()) {
    RunRecord r = run_of(q, store.on_server());
    const auto has = [&](const std::string& tag) { return std::find(r.tags.begin(), r.tags.end(), tag) != r.tags.end(); };
    if (!filter.status.empty() && r.status != filter.status) continue;
    if (!filter.suite.empty() && r.suite != filter.suite) continue;
    if (!filter.since.empty() && r.started_at < filter.since) continue;
    if (!filter.until.empty() && r.started_at > filter.until) continue;
    if (!std::all_of(filter.tags.begin(), filter.tags.end(), has)) continue;
    runs.push_back(std::move(r));
  }
  if (filter.last > 0 && runs.size() > static_cast<std::size_t>(filter.last)) runs.erase(runs.begin(), runs.end() - filter.last);
  return runs;
}

RunRecord get_run(ResultsStore& store, std::int64_t id, const std::string& what) {
  Query q(store, run_columns(store) + " WHERE r.id = ?");
  q.bind(1, id);
  if (!q.step()) throw kv::InputError(store.path(), what, fmt::format("no run {} in this database", id));
  return run_of(q, store.on_server());
}

std::int64_t resolve_run(ResultsStore& store, const std::string& selector, const std::string& flag) {
  std::int64_t id = 0;
  const auto [end, error] = std::from_chars(selector.data(), selector.data() + selector.size(), id);
  if (error == std::errc() && end == selector.data() + selector.size()) {
    if (id < 1) throw kv::InputError(flag, selector, "not a run id (a positive integer)");
    return get_run(store, id, flag).id;
  }
  if (selector == "latest" || selector.rfind("latest:", 0) == 0) {
    RunFilter filter;
    filter.status = "complete";
    const std::string what = selector.size() > 7 ? selector.substr(7) : "";
    if (what.rfind("suite=", 0) == 0) {
      filter.suite = what.substr(6);
    } else if (!what.empty()) {
      filter.tags = {what};
    }
    const auto runs = list_runs(store, filter);
    if (runs.empty()) throw kv::InputError(flag, selector, "no complete run matches in " + store.path());
    return runs.back().id;
  }
  if (const auto baseline = find_baseline(store, selector)) return baseline->run_id;
  throw kv::InputError(flag, selector,
                       "neither a run id, latest, latest:TAG, latest:suite=NAME nor a baseline name (`kvbench baseline list`)");
}

std::vector<CaseRecord> load_cases(ResultsStore& store, std::int64_t run_id) {
  std::vector<CaseRecord> cases;
  std::vector<std::int64_t> ids;
  {
    Query q(store, "SELECT id, name, model, workload, policy, soc, status, skipped_reason, error FROM cases WHERE run_id = ? ORDER BY id");
    q.bind(1, run_id);
    while (q.step()) {
      ids.push_back(q.int64(0));
      cases.push_back({q.text(1), q.text(2), q.text(3), q.text(4), q.text(5), q.text(6), q.text(7), q.text(8), {}});
    }
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    Query q(store,
            "SELECT repetition, name, value, na_reason, unit, clock, extrapolated, noisy FROM metrics WHERE case_id = ?"
            " ORDER BY repetition, name, clock");
    q.bind(1, ids[i]);
    const CaseRecord& c = cases[i];
    while (q.step()) {
      MetricRow m{c.name, c.model, c.workload, c.policy, c.soc, static_cast<int>(q.int64(0)), q.text(1), std::nullopt, q.text(3),
                  q.text(4), q.text(5), q.int64(6) != 0, q.int64(7) != 0};
      if (!q.null(2)) m.value = q.real(2);
      cases[i].metrics.push_back(std::move(m));
    }
  }
  return cases;
}

std::vector<CaseSamples> load_samples(ResultsStore& store, std::int64_t run_id) {
  std::vector<CaseSamples> out;
  for (const CaseRecord& c : load_cases(store, run_id)) {
    CaseSamples samples{c.name, c.model, c.workload, c.policy, c.soc, c.status, {}, {}};
    for (const MetricRow& m : c.metrics) {
      const Clock clock = parse_clock(m.clock).value_or(Clock::Exact);
      const std::string key = metric_key(m.name, clock);
      if (m.value) {
        samples.samples[key].push_back({*m.value, m.noisy});
      } else {
        samples.na_reason.emplace(key, m.na_reason);
      }
    }
    out.push_back(std::move(samples));
  }
  return out;
}

RepetitionNoise repetition_noise(ResultsStore& store, std::int64_t run_id) {
  Query q(store,
          "SELECT count(*), coalesce(sum(noisy), 0) FROM (SELECT m.case_id, m.repetition, max(m.noisy) AS noisy FROM metrics m"
          " JOIN cases c ON c.id = m.case_id WHERE c.run_id = ? AND m.clock = 'host' GROUP BY m.case_id, m.repetition) r");
  q.bind(1, run_id);
  RepetitionNoise noise;
  if (q.step()) {
    noise.repetitions = static_cast<int>(q.int64(0));
    noise.noisy = static_cast<int>(q.int64(1));
  }
  return noise;
}

std::map<std::string, std::vector<double>> load_series(ResultsStore& store, std::int64_t run_id, const std::string& case_name,
                                                       int repetition) {
  std::map<std::string, std::vector<double>> out;
  Query q(store,
          "SELECT s.name, s.value FROM series s JOIN cases c ON c.id = s.case_id WHERE c.run_id = ? AND c.name = ? AND s.repetition = ?"
          " ORDER BY s.name, s.step");
  q.bind(1, run_id).bind(2, case_name).bind(3, static_cast<std::int64_t>(repetition));
  while (q.step()) out[q.text(0)].push_back(q.null(1) ? std::nan("") : q.real(1));
  return out;
}

std::vector<RunEvent> load_events(ResultsStore& store, std::int64_t run_id, const std::string& case_name, int repetition) {
  std::vector<RunEvent> out;
  Query q(store, "SELECT e.step, e.kind, " + store.event_data_sql("e") +
                     " FROM events e JOIN cases c ON c.id = e.case_id WHERE c.run_id = ? AND c.name = ?"
                     " AND e.repetition = ? ORDER BY e.rowid");
  q.bind(1, run_id).bind(2, case_name).bind(3, static_cast<std::int64_t>(repetition));
  while (q.step()) out.push_back(parse_event(q.text(1), q.int64(0), q.text(2)));
  return out;
}

std::map<std::string, std::vector<std::int64_t>> load_histograms(ResultsStore& store, std::int64_t run_id, const std::string& case_name,
                                                                 int repetition) {
  std::map<std::string, std::vector<std::int64_t>> out;
  Query q(store,
          "SELECT h.name, h.count FROM histograms h JOIN cases c ON c.id = h.case_id WHERE c.run_id = ? AND c.name = ?"
          " AND h.repetition = ? ORDER BY h.name, h.bin");
  q.bind(1, run_id).bind(2, case_name).bind(3, static_cast<std::int64_t>(repetition));
  while (q.step()) out[q.text(0)].push_back(q.int64(1));
  return out;
}

std::vector<VerdictRow> list_verdicts(ResultsStore& store, std::int64_t candidate_run) {
  std::vector<VerdictRow> out;
  if (!has_table(store, "verdicts")) return out;
  Query q(store,
          "SELECT id, baseline_run, candidate_run, created_at, outcome, regressed, improved, inconclusive, rows_json FROM verdicts"
          " WHERE ? = 0 OR candidate_run = ? ORDER BY id");
  q.bind(1, candidate_run).bind(2, candidate_run);
  while (q.step()) {
    out.push_back({q.int64(0), q.int64(1), q.int64(2), q.text(3), q.text(4), static_cast<int>(q.int64(5)), static_cast<int>(q.int64(6)),
                   static_cast<int>(q.int64(7)), q.text(8)});
  }
  return out;
}

std::vector<AckRow> list_acks(ResultsStore& store) {
  std::vector<AckRow> out;
  if (!has_table(store, "acks")) return out;
  Query q(store,
          "SELECT id, run_id, baseline_run, case_glob, metric_glob, reason, created_at, coalesce(expires_at, '') FROM acks ORDER BY id");
  while (q.step()) out.push_back({q.int64(0), q.int64(1), q.int64(2), q.text(3), q.text(4), q.text(5), q.text(6), q.text(7)});
  return out;
}

std::vector<ChangePointRow> list_change_points(ResultsStore& store) {
  std::vector<ChangePointRow> out;
  if (!has_table(store, "change_points")) return out;
  Query q(store, "SELECT id, run_id, case_name, metric, detected_at, detail, before_value, after_value FROM change_points ORDER BY id");
  while (q.step()) {
    ChangePointRow row{q.int64(0), q.int64(1), q.text(2), q.text(3), q.text(4), q.text(5), std::nullopt, std::nullopt};
    if (!q.null(6)) row.before = q.real(6);
    if (!q.null(7)) row.after = q.real(7);
    out.push_back(std::move(row));
  }
  return out;
}

std::vector<BaselineRecord> list_baselines(ResultsStore& store) {
  std::vector<BaselineRecord> out;
  if (!has_table(store, "baselines")) return out;
  Query q(store, "SELECT name, run_id, set_at, reason FROM baselines ORDER BY name");
  while (q.step()) out.push_back({q.text(0), q.int64(1), q.text(2), q.text(3)});
  return out;
}

std::optional<BaselineRecord> find_baseline(ResultsStore& store, const std::string& name) {
  if (!has_table(store, "baselines")) return std::nullopt;
  Query q(store, "SELECT name, run_id, set_at, reason FROM baselines WHERE name = ?");
  q.bind(1, name);
  if (!q.step()) return std::nullopt;
  return BaselineRecord{q.text(0), q.int64(1), q.text(2), q.text(3)};
}

}  // namespace kvbench
