#include "model_validation.h"

#include <algorithm>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "comparison.h"
#include "metric_table.h"
#include "results_reader.h"

namespace kvbench {

namespace {

using json = nlohmann::json;

// The median of the quiet repetitions (all of them when every one was noisy).
std::optional<double> quiet_value(const CaseSamples& c, const std::string& key) {
  const auto it = c.samples.find(key);
  if (it == c.samples.end() || it->second.empty()) return std::nullopt;
  return quiet_median(it->second);
}

}  // namespace

std::string measuring_machine(const RunRecord& run) {
  const std::string board = run_meta_text(run, "board");
  return board.empty() ? run_meta_text(run, "cpu_model") : board;
}

double validation_tolerance(const std::string& metric) { return metric == "ttft_ms" ? 0.35 : 0.25; }

// Per complete host case, the measured and modelled attention compute, tpot p50, ttft and L2 wait
// (engine only on the synthetic backend: its modelled dense layers taken out).
std::vector<ValidationRow> validation_rows(ResultsStore& store, const RunRecord& run) {
  std::set<std::string> synthetic_models;
  const json config = json::parse(run.config_json, nullptr, false);
  if (config.is_object() && config.contains("models") && config["models"].is_array()) {
    for (const json& m : config["models"]) {
      if (m.is_object() && m.value("backend", "") == "synthetic") synthetic_models.insert(m.value("name", ""));
    }
  }
  std::vector<ValidationRow> rows;
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
      ValidationRow row{c.name, metric, "", quiet_value(c, metric), model(metric)};
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

}  // namespace kvbench
