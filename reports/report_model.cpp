#include "report_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "model/synthetic_presets.h"

namespace kvbench::report {

namespace {

using json = nlohmann::json;

std::map<std::string, std::string> policy_budgets(const std::string& config_json) {
  std::map<std::string, std::string> out;
  const json config = json::parse(config_json, nullptr, false);
  if (config.is_discarded() || !config.contains("policies")) return out;
  for (const json& p : config["policies"]) {
    if (!p.is_object() || !p.contains("name")) continue;
    std::string what;
    if (p.contains("sparse") && p["sparse"].is_object()) {
      const json& s = p["sparse"];
      const std::string selector = s.value("selector", "full");
      what = selector;
      if (selector != "full" && s.contains("budget") && s["budget"].is_number()) what += fmt::format(" {:.3g}%", s["budget"].get<double>() * 100.0);
    }
    out[p["name"].get<std::string>()] = what;
  }
  return out;
}

// The SoC a device run's measured cases were priced as ("" for a run on the host).
std::string device_soc(const RunRecord& run) { return run_meta_text(run, "device_soc"); }

// The newest complete device run of each SoC in `socs`, its measured cases against that SoC's model.
// Found by the tag a device run carries (device=SOC); its metadata has the last word.
std::vector<DeviceRun> device_runs(ResultsStore& store, const std::vector<std::string>& socs) {
  std::vector<DeviceRun> runs;
  for (const std::string& soc : socs) {
    if (soc == "host") continue;
    RunFilter filter;
    filter.status = "complete";
    filter.tags = {"device=" + soc};
    const std::vector<RunRecord> tagged = list_runs(store, filter);
    const RunRecord* newest = nullptr;
    for (const RunRecord& r : tagged) {
      if ((newest == nullptr || newest->id < r.id) && device_soc(r) == soc) newest = &r;
    }
    if (newest != nullptr) runs.push_back(DeviceRun{*newest, soc, measuring_machine(*newest), validation_rows(store, *newest)});
  }
  return runs;
}

}  // namespace

bool priced_from_host(const RunView& run, const CaseView& c) {
  const auto rerun = c.figures.find("capacity_rerun");
  const bool reran = rerun != c.figures.end() && rerun->second.median.value_or(0.0) > 0.0;
  return c.status == "complete" && c.soc != "host" && !reran && std::any_of(run.cases.begin(), run.cases.end(), [&](const CaseView& o) {
           return o.soc == "host" && o.model == c.model && o.workload == c.workload && o.policy == c.policy;
         });
}

CaseShape case_shape(const std::string& config_json, const CaseView& c) {
  CaseShape shape;
  const json config = json::parse(config_json, nullptr, false);
  if (!config.is_object()) return shape;
  for (const json& m : config.value("models", json::array())) {
    if (!m.is_object() || m.value("name", "") != c.model || m.value("backend", "") != "synthetic") continue;
    for (const kv::SyntheticPreset& p : kv::synthetic_presets()) {
      if (p.name == m.value("preset", "") && m.value("sample_layers", 0) > 0) {
        shape.layer_scale = static_cast<double>(p.layers) / std::min(p.layers, m.value("sample_layers", 1));
      }
    }
  }
  for (const json& p : config.value("policies", json::array())) {
    if (!p.is_object() || p.value("name", "") != c.policy) continue;
    const std::string selector = p.contains("sparse") && p["sparse"].is_object() ? p["sparse"].value("selector", "full") : "full";
    shape.selects = selector != "full" && selector != "window";
  }
  return shape;
}


ReportModel load_report_model(ResultsStore& store, const ReportOptions& o) {
  ReportModel m;
  m.record = get_run(store, o.run_id, "--run");
  m.host = load_run_view(store, o.run_id, Clock::Host);
  m.model = load_run_view(store, o.run_id, Clock::Model);
  m.suite = o.suite.empty() ? m.record.suite : o.suite;
  m.comparison = o.comparison;
  m.baseline_note = o.baseline_note;
  if (o.comparison) m.baseline_run = o.comparison->baseline_run;
  m.policy_budgets = policy_budgets(m.record.config_json);
  RunFilter filter;
  filter.suite = m.suite;
  filter.status = "complete";
  // A device's runs are not the trend of the host's, nor the host's of a device's.
  const std::string own_device = device_soc(m.record);
  for (const RunRecord& r : list_runs(store, filter)) {
    if (r.id <= o.run_id && device_soc(r) == own_device) m.history.push_back(r.id);
  }
  if (std::find(m.history.begin(), m.history.end(), o.run_id) == m.history.end()) m.history.push_back(o.run_id);
  std::sort(m.history.begin(), m.history.end());
  if (static_cast<int>(m.history.size()) > o.history) m.history.erase(m.history.begin(), m.history.end() - o.history);
  if (m.history.size() >= 2) {
    for (std::int64_t id : m.history) m.history_views.emplace(id, id == o.run_id ? m.host : load_run_view(store, id));
  }
  for (const CaseView& c : m.host.cases) {
    if (c.status == "skipped" || priced_from_host(m.host, c)) continue;
    CaseRecordings& r = m.recordings[c.name];
    r.series = load_series(store, o.run_id, c.name, 1);
    r.events = load_events(store, o.run_id, c.name, 1);
    r.histograms = load_histograms(store, o.run_id, c.name, 1);
    r.shape = case_shape(m.record.config_json, c);
  }
  std::vector<std::string> socs;
  for (const CaseView& c : m.model.cases) {
    if (c.soc != "host" && std::find(socs.begin(), socs.end(), c.soc) == socs.end()) socs.push_back(c.soc);
  }
  if (!own_device.empty()) socs.push_back(own_device);
  m.device_runs = device_runs(store, socs);
  return m;
}

}  // namespace kvbench::report
