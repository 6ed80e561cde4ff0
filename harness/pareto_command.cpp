#include "pareto_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "cli.h"
#include "cli_checks.h"
#include "human_units.h"
#include "results_reader.h"
#include "results_store.h"
#include "runtime/error.h"

namespace kvbench {

namespace {

using json = nlohmann::json;

const MetricDef& objective(const std::string& name, const std::string& flag) {
  const MetricDef* def = find_metric(name);
  if (def == nullptr) throw kv::InputError(flag, name, "not a metric (`kvbench metrics` lists them)");
  if (def->better == Better::None) {
    throw kv::InputError(flag, name, "has no better direction in the metric table, so it cannot be an objective");
  }
  return *def;
}

const char* direction(Better b) { return b == Better::Lower ? "lower is better" : "higher is better"; }

}  // namespace

void add_pareto_command(CLI::App& app, ParetoOptions& o) {
  o.command = app.add_subcommand("pareto", "The policies no other beats on every objective, per model, workload and SoC of a run");
  o.command->add_option("--run", o.run, kRunSelectorHelp)->capture_default_str();
  add_db_option(o.command, "--db", o.db, "results database")->capture_default_str();
  o.command->add_option("--soc", o.soc, "only this SoC's cases");
  o.command->add_option("--x", o.x, "first objective (a metric)")->capture_default_str();
  o.command->add_option("--y", o.y, "second objective: an accuracy figure such as ppl_delta_pct, attn_rel_error or attn_mass_recall")
      ->required();
  o.command->add_option("--z", o.z, "optional third objective, e.g. decode_tps (measured on host cases, modelled on other SoCs')");
  o.command->add_option("--format", o.format, "table or json")->check(CLI::IsMember({"table", "json"}))->capture_default_str();
  o.command->add_flag("--all", o.all, "also list the dominated policies and what dominates each");
  o.command->add_flag("--include-unfit", o.include_unfit,
                      "compare configurations that do not fit the SoC's memory too (marked); by default they are left out of the "
                      "fronts and listed");
}

namespace {

json groups_json(const ParetoOptions& o, const std::vector<ParetoGroup>& groups) {
  json doc = json::array();
  for (const ParetoGroup& g : groups) {
    json objs = json::array();
    for (const std::string& name : g.objectives) {
      const MetricDef& def = metric(name);
      objs.push_back({{"name", name}, {"unit", def.unit}, {"better", def.better == Better::Lower ? "lower" : "higher"}});
    }
    json points = json::array();
    for (std::size_t i = 0; i < g.points.size(); ++i) {
      if (!g.result.on_front[i] && !o.all) continue;
      json values = json::object();
      for (std::size_t k = 0; k < g.objectives.size(); ++k) values[g.objectives[k]] = g.points[i].values[k];
      json by = json::array();
      for (std::size_t j : g.result.dominated_by[i]) by.push_back(g.points[j].label);
      json p = {{"policy", g.points[i].label},
                {"values", values},
                {"front", static_cast<bool>(g.result.on_front[i])},
                {"fits", static_cast<bool>(g.point_fits[i])}};
      if (o.all) p["dominated_by"] = by;
      points.push_back(p);
    }
    json incomplete = json::array();
    for (const auto& [policy, why] : g.incomplete) incomplete.push_back({{"policy", policy}, {"reason", why}});
    json unfit = json::array();
    for (const auto& [policy, why] : g.unfit) unfit.push_back({{"policy", policy}, {"reason", "does not fit in memory: " + why}});
    doc.push_back({{"model", g.model}, {"workload", g.workload}, {"soc", g.soc}, {"objectives", objs}, {"points", points},
                   {"incomplete", incomplete}, {"does_not_fit", unfit}});
  }
  return doc;
}

void print_groups(const ParetoOptions& o, std::FILE* out, std::int64_t run_id, const std::string& suite,
                  const std::vector<std::string>& objectives, const std::vector<ParetoGroup>& groups) {
  fmt::print(out, "run {} ({}): Pareto fronts over", run_id, suite);
  for (const std::string& name : objectives) fmt::print(out, " {} ({})", name, direction(metric(name).better));
  fmt::print(out, "\n");
  for (const ParetoGroup& g : groups) {
    fmt::print(out, "\n{} / {} / {}\n", g.model, g.workload, g.soc);
    std::size_t width = 6;
    for (const ParetoPoint& p : g.points) width = std::max(width, p.label.size() + 8);
    fmt::print(out, "  {:<5} {:<{}}", "", "policy", width);
    for (const std::string& name : g.objectives) fmt::print(out, "  {:>18}", name);
    fmt::print(out, "\n");
    for (std::size_t i = 0; i < g.points.size(); ++i) {
      const bool front = g.result.on_front[i];
      if (!front && !o.all) continue;
      fmt::print(out, "  {:<5} {:<{}}", front ? "front" : "", g.points[i].label + (g.point_fits[i] ? "" : " (unfit)"), width);
      for (std::size_t k = 0; k < g.objectives.size(); ++k) {
        fmt::print(out, "  {:>18}", human_value(g.points[i].values[k], metric(g.objectives[k]).unit));
      }
      if (!front) {
        std::string by;
        for (std::size_t j : g.result.dominated_by[i]) by += (by.empty() ? "" : ", ") + g.points[j].label;
        fmt::print(out, "  dominated by {}", by);
      }
      fmt::print(out, "\n");
    }
    if (g.points.empty()) fmt::print(out, "  (no policy has every objective{})\n", g.unfit.empty() ? "" : " and fits");
    for (const auto& [policy, why] : g.incomplete) fmt::print(out, "  not compared {}: {}\n", policy, why);
    for (const auto& [policy, why] : g.unfit) {
      fmt::print(out, "  {} {}: does not fit in memory ({})\n", o.include_unfit ? "unfit" : "left out", policy, why);
    }
  }
}

}  // namespace

int run_pareto(const ParetoOptions& o, std::FILE* out) {
  std::vector<std::string> objectives = {o.x, o.y};
  if (!o.z.empty()) objectives.push_back(o.z);
  const char* flags[] = {"--x", "--y", "--z"};
  for (std::size_t i = 0; i < objectives.size(); ++i) {
    objective(objectives[i], flags[i]);
    for (std::size_t j = 0; j < i; ++j) {
      if (objectives[j] == objectives[i]) throw kv::InputError(flags[i], objectives[i], std::string("is also ") + flags[j]);
    }
  }
  ResultsStore store(o.db, Access::ReadOnly);
  const std::int64_t run_id = resolve_run(store, o.run, "--run");
  const RunView host = load_run_view(store, run_id, Clock::Host);
  const RunView model = load_run_view(store, run_id, Clock::Model);
  if (!o.soc.empty() && std::none_of(host.cases.begin(), host.cases.end(), [&](const CaseView& c) { return c.soc == o.soc; })) {
    std::string socs;
    for (const CaseView& c : host.cases) {
      if (socs.find(c.soc) == std::string::npos) socs += (socs.empty() ? "" : ", ") + c.soc;
    }
    throw kv::InputError("--soc", o.soc, fmt::format("run {} has no case on this SoC (its SoCs: {})", run_id, socs));
  }
  const std::vector<ParetoGroup> groups = pareto_groups(host, model, objectives, o.soc, o.include_unfit);

  if (o.format == "json") {
    fmt::print(out, "{}\n", json{{"run", run_id}, {"groups", groups_json(o, groups)}}.dump(2));
  } else {
    print_groups(o, out, run_id, host.suite, objectives, groups);
  }
  return kExitOk;
}

}  // namespace kvbench
