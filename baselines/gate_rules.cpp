#include "gate_rules.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <nlohmann/json.hpp>
#include <set>

#include "runtime/error.h"

namespace kvbench {

namespace {

using json = nlohmann::json;

bool matches(const std::string& glob, const std::string& name) { return ::fnmatch(glob.c_str(), name.c_str(), 0) == 0; }

[[noreturn]] void fail(const std::string& file, const std::string& path, const std::string& reason) {
  throw kv::InputError(file, path, reason);
}

double threshold(const json& j, const std::string& key, const std::string& file, const std::string& path) {
  if (!j.at(key).is_number()) fail(file, path + "/" + key, "must be a number");
  const double v = j.at(key).get<double>();
  if (!(v >= 0.0) || v > 1e6) fail(file, path + "/" + key, fmt::format("{} must be >= 0", v));
  return v;
}

}  // namespace

MetricRule default_rule(const MetricDef& def, std::optional<Clock> clock) {
  MetricRule rule;
  rule.better = def.better;
  rule.gated = def.better != Better::None;
  if (measured_here(clock.value_or(def.clock))) {
    rule.kind = GateClass::Statistical;
    rule.relative = 0.05;
  } else {
    rule.kind = GateClass::Deterministic;
    rule.relative = 1e-9;
  }
  return rule;
}

MetricRule GateRules::rule_for(const std::string& metric) const {
  const std::optional<MetricKey> key = parse_metric_key(metric);
  const MetricDef* def = key ? find_metric(key->name) : nullptr;
  MetricRule rule = def != nullptr ? default_rule(*def, key->clock) : MetricRule{};
  for (const Entry& e : entries) {
    if (!matches(e.glob, metric)) continue;
    // A key on another clock than its name's own (tpot_ms_p50@model) takes only rules that name
    // a clock: host-tuned rules such as "tpot_*" must not reach modelled figures.
    if (metric.find('@') != std::string::npos && e.glob.find('@') == std::string::npos) continue;
    if (e.gated) rule.gated = *e.gated;
    if (e.better) rule.better = *e.better;
    if (e.kind) rule.kind = *e.kind;
    if (e.relative) rule.relative = *e.relative;
    if (e.absolute) rule.absolute = *e.absolute;
  }
  if (rule.better == Better::None) rule.gated = false;
  return rule;
}

GateRules parse_gate_rules(const std::string& text, const std::string& file) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    fail(file, fmt::format("byte {}", e.byte), std::string("malformed JSON: ") + e.what());
  } catch (const json::out_of_range& e) {
    fail(file, "/", std::string("a number beyond a double's range: ") + e.what());
  }
  if (!root.is_object()) fail(file, "/", "must be an object with \"rules\"");
  GateRules rules;
  for (const auto& [key, value] : root.items()) {
    if (key == "fdr") {
      if (!value.is_number() || !(value.get<double>() > 0.0 && value.get<double>() < 1.0)) fail(file, "/fdr", "must be in (0, 1)");
      rules.fdr = value.get<double>();
    } else if (key != "rules") {
      fail(file, "/" + key, "unknown field (fdr, rules)");
    }
  }
  if (!root.contains("rules") || !root["rules"].is_array()) fail(file, "/rules", "must be an array");
  std::vector<std::string> names;
  for (const MetricDef& def : metric_table()) {
    names.push_back(def.name);
    if (def.modelled) names.push_back(metric_key(def.name, Clock::Model));
  }
  for (std::size_t i = 0; i < root["rules"].size(); ++i) {
    const json& j = root["rules"][i];
    const std::string path = fmt::format("/rules/{}", i);
    if (!j.is_object()) fail(file, path, "must be an object");
    static const std::set<std::string> known = {"metric", "gated", "direction", "class", "relative", "absolute", "why"};
    for (const auto& [key, value] : j.items()) {
      if (known.count(key) == 0) fail(file, path + "/" + key, "unknown field (metric, gated, direction, class, relative, absolute, why)");
    }
    if (!j.contains("metric") || !j["metric"].is_string()) fail(file, path + "/metric", "is required (a metric name or glob)");
    GateRules::Entry e;
    e.glob = j["metric"].get<std::string>();
    if (std::none_of(names.begin(), names.end(), [&](const std::string& n) { return matches(e.glob, n); })) {
      fail(file, path + "/metric", "'" + e.glob + "' matches no metric (`kvbench metrics` lists them)");
    }
    if (j.contains("gated")) {
      if (!j["gated"].is_boolean()) fail(file, path + "/gated", "must be true or false");
      e.gated = j["gated"].get<bool>();
    }
    if (j.contains("direction")) {
      const std::string d = j["direction"].is_string() ? j["direction"].get<std::string>() : "";
      if (d == "lower") e.better = Better::Lower;
      else if (d == "higher") e.better = Better::Higher;
      else if (d == "none") e.better = Better::None;
      else fail(file, path + "/direction", "'" + j["direction"].dump() + "' is not one of lower, higher, none");
    }
    if (j.contains("class")) {
      const std::string c = j["class"].is_string() ? j["class"].get<std::string>() : "";
      if (c == "deterministic") e.kind = GateClass::Deterministic;
      else if (c == "statistical") e.kind = GateClass::Statistical;
      else fail(file, path + "/class", "'" + j["class"].dump() + "' is not one of deterministic, statistical");
    }
    if (j.contains("relative")) e.relative = threshold(j, "relative", file, path);
    if (j.contains("absolute")) e.absolute = threshold(j, "absolute", file, path);
    if (j.contains("why")) e.why = j["why"].is_string() ? j["why"].get<std::string>() : "";
    rules.entries.push_back(std::move(e));
  }
  return rules;
}

}  // namespace kvbench
