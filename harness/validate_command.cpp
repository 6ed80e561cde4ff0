#include "validate_command.h"

#include <algorithm>

#include <fmt/format.h>

#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "human_units.h"
#include "metric_table.h"
#include "results_reader.h"
#include "runtime/error.h"
#include "statistics.h"

namespace kvbench {

namespace {

using json = nlohmann::json;

struct Row {
  std::string case_name, metric, note;
  std::optional<double> measured, modelled;
  std::optional<double> ratio() const {
    if (!measured || !modelled || !(*measured > 0.0)) return std::nullopt;
    return *modelled / *measured;
  }
};

// The median of the quiet repetitions (all of them when every one was noisy).
std::optional<double> quiet_value(const CaseSamples& c, const std::string& key) {
  const auto it = c.samples.find(key);
  if (it == c.samples.end() || it->second.empty()) return std::nullopt;
  return quiet_median(it->second);
}

// Within this band the model counts as validated for that figure (docs/cost-model.md).
double tolerance(const std::string& metric) { return metric == "ttft_ms" ? 0.35 : 0.25; }

}  // namespace

void add_validate_command(CLI::App& app, ValidateOptions& o) {
  o.command = app.add_subcommand("validate-model", "The cost model against measurement: a run's host cases, measured and modelled side by side");
  o.command->add_option("--run", o.run, kRunSelectorHelp)->capture_default_str();
  o.command->add_option("--db", o.db, "results database")->capture_default_str();
  o.command->add_flag("--json", o.json, "print a list of {case, metric, measured, modelled, ratio}");
}

namespace {

// Per complete host case, the measured and modelled attention compute, tpot p50, ttft and L2 wait
// (engine only on the synthetic backend: its modelled dense layers taken out).
std::vector<Row> validation_rows(ResultsStore& store, const RunRecord& run) {
  std::set<std::string> synthetic_models;
  const json config = json::parse(run.config_json, nullptr, false);
  if (config.is_object() && config.contains("models") && config["models"].is_array()) {
    for (const json& m : config["models"]) {
      if (m.is_object() && m.value("backend", "") == "synthetic") synthetic_models.insert(m.value("name", ""));
    }
  }
  std::vector<Row> rows;
  for (const CaseSamples& c : load_samples(store, run.id)) {
    if (c.soc != "host" || c.status != "complete") continue;
    const bool synthetic = synthetic_models.count(c.model) > 0;
    const auto model = [&](const std::string& name) { return quiet_value(c, metric_key(name, Clock::Model)); };
    // Dense time the host did not run (synthetic): per decode step, and per request's prefill.
    std::optional<double> dense_step, dense_request;
    if (synthetic) {
      const auto decode_dense = model("span_decode_model_compute_ms"), decode_total = model("span_decode_total_ms"),
                 tps = model("decode_tps");
      if (decode_dense && decode_total && tps && *tps > 0.0) dense_step = *decode_dense / (*tps * *decode_total * 1e-3);
      const auto prefill_dense = model("span_prefill_model_compute_ms"), prefill_total = model("span_prefill_total_ms"),
                 ttft = model("ttft_ms");
      if (prefill_dense && prefill_total && ttft && *ttft > 0.0) dense_request = *prefill_dense / (*prefill_total / *ttft);
    }
    for (const std::string metric : {"span_decode_attn_compute_ms", "tpot_ms_p50", "ttft_ms", "dma_wait_ms"}) {
      Row row{c.name, metric, "", quiet_value(c, metric), model(metric)};
      // Every repetition noisy: the median is over all of them, and the row says so.
      const auto measured = c.samples.find(metric);
      const bool all_noisy = measured != c.samples.end() && !measured->second.empty() &&
                             std::all_of(measured->second.begin(), measured->second.end(), [](const Sample& x) { return x.noisy; });
      const auto add_note = [&](const std::string& note) { row.note = row.note.empty() ? note : row.note + "; " + note; };
      if (synthetic && row.modelled && metric == "tpot_ms_p50" && dense_step) {
        *row.modelled -= *dense_step;
        add_note("engine only: modelled dense layers taken out");
      }
      if (synthetic && row.modelled && metric == "ttft_ms" && dense_request) {
        *row.modelled -= *dense_request;
        add_note("engine only: modelled dense layers taken out");
      }
      if (all_noisy && row.measured) add_note("every repetition noisy: measured is the median of all of them");
      if (!row.measured && !row.modelled) continue;
      rows.push_back(std::move(row));
    }
  }
  return rows;
}

}  // namespace

int run_validate(const ValidateOptions& o, std::FILE* out) {
  ResultsStore store(o.db, Access::ReadOnly);
  const std::int64_t run_id = resolve_run(store, o.run, "--run");
  const RunRecord run = get_run(store, run_id, "--run");
  const std::vector<Row> rows = validation_rows(store, run);
  if (o.json) {
    json list = json::array();
    for (const Row& r : rows) {
      const auto ratio = r.ratio();
      list.push_back({{"case", r.case_name},
                      {"metric", r.metric},
                      {"measured", r.measured ? json(*r.measured) : json(nullptr)},
                      {"modelled", r.modelled ? json(*r.modelled) : json(nullptr)},
                      {"ratio", ratio ? json(*ratio) : json(nullptr)},
                      {"note", r.note}});
    }
    fmt::print(out, "{}\n", list.dump(2));
    return kExitOk;
  }
  fmt::print(out, "run {} ({}): measured on the host clock (median of quiet repetitions) vs modelled with the host profile\n\n", run.id,
             run.suite);
  std::string last_case;
  std::map<std::string, std::pair<int, int>> within;  // metric -> (in band, with a ratio)
  for (const Row& r : rows) {
    if (r.case_name != last_case) {
      fmt::print(out, "{}\n", r.case_name);
      last_case = r.case_name;
    }
    const auto ratio = r.ratio();
    std::string mark;
    if (ratio) {
      const bool in = std::fabs(*ratio - 1.0) <= tolerance(r.metric);
      auto& [good, all] = within[r.metric];
      good += in ? 1 : 0;
      ++all;
      mark = in ? "" : " (outside +-" + fmt::format("{:.0f}%", tolerance(r.metric) * 100.0) + ")";
    }
    fmt::print(out, "  {:<28} {:>11} {:>11} {:>7}{}{}\n", r.metric, r.measured ? human_value(*r.measured, "ms") : "-",
               r.modelled ? human_value(*r.modelled, "ms") : "-", ratio ? fmt::format("{:.2f}", *ratio) : "-", mark,
               r.note.empty() ? "" : "  " + r.note);
  }
  fmt::print(out, "\n{:<30} within band\n", "metric");
  for (const auto& [metric, counts] : within) {
    fmt::print(out, "{:<30} {} of {} (+-{:.0f}%)\n", metric, counts.first, counts.second, tolerance(metric) * 100.0);
  }
  return kExitOk;
}

}  // namespace kvbench
