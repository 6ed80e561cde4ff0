#include "comparison_record.h"

#include <nlohmann/json.hpp>

#include <algorithm>

#include "runtime/error.h"

namespace kvbench {

namespace {

using json = nlohmann::json;

json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }
json optional_text(const std::optional<std::string>& v) { return v ? json(*v) : json(nullptr); }

std::optional<double> number_of(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? std::optional<double>(j[key].get<double>()) : std::nullopt;
}
std::optional<std::string> text_of(const json& j, const char* key) {
  return j.contains(key) && j[key].is_string() ? std::optional<std::string>(j[key].get<std::string>()) : std::nullopt;
}
std::vector<std::string> texts_of(const json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key) || !j[key].is_array()) return out;
  for (const json& v : j[key]) {
    if (v.is_string()) out.push_back(v.get<std::string>());
  }
  return out;
}
int count_of(const json& j, const char* key, int otherwise) {
  return j.contains(key) && j[key].is_number_integer() ? j[key].get<int>() : otherwise;
}
std::int64_t id_of(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number_integer() ? j[key].get<std::int64_t>() : 0;
}

// A verdict by its name; nullopt where the key is absent or null. A name this kvbench does not
// know (a newer one's, or damage) is refused: a row read as "unchanged" could pass a gate.
std::optional<Verdict> verdict_of(const json& j, const char* key, const std::string& where, const std::string& field) {
  if (!j.contains(key) || j[key].is_null()) return std::nullopt;
  const std::optional<std::string> name = text_of(j, key);
  const std::optional<Verdict> verdict = name ? verdict_from_name(*name) : std::nullopt;
  if (!verdict) {
    throw kv::InputError(where, field + "." + key, "not a verdict: " + j[key].dump() + " (regressed, improved, unchanged, inconclusive, not gated, unreliable)");
  }
  return verdict;
}

}  // namespace

int verdict_order(Verdict v) {
  switch (v) {
    case Verdict::Regressed: return 0;
    case Verdict::Unreliable: return 1;
    case Verdict::Improved: return 2;
    case Verdict::Inconclusive: return 3;
    case Verdict::Unchanged: return 4;
    case Verdict::NotGated: return 5;
  }
  return 6;
}

std::string comparison_outcome(const ComparisonRecord& c, bool inconclusive_fails) {
  if (c.definition_changed) return "definition-changed";
  if (c.failing > 0) return "fail";
  if (c.unreliable > 0) return "unreliable";
  if (c.inconclusive > 0) return inconclusive_fails ? "fail" : "inconclusive";
  return "pass";
}

ComparisonRecord comparison_record(const RunComparison& c) {
  ComparisonRecord r;
  r.baseline_run = c.baseline.id;
  r.candidate_run = c.candidate.id;
  r.suite = c.candidate.suite;
  r.fdr = c.fdr;
  r.regressed = c.count(Verdict::Regressed);
  r.failing = c.failing();
  r.unreliable = c.unreliable();
  r.unreliable_judged_by_cpu = c.count(Verdict::Unreliable) - c.unreliable();
  r.improved = c.count(Verdict::Improved);
  r.inconclusive = c.count(Verdict::Inconclusive);
  r.unchanged = c.count(Verdict::Unchanged);
  r.not_gated = c.count(Verdict::NotGated);
  r.caveats = c.caveats;
  r.definition_changed = c.definition_change;
  r.outcome = comparison_outcome(r, false);
  r.plain_pass = r.failing == 0 && r.unreliable + r.unreliable_judged_by_cpu == 0 && r.inconclusive == 0 && !r.definition_changed;
  r.only_in_baseline = c.only_in_baseline;
  r.only_in_candidate = c.only_in_candidate;
  std::vector<std::pair<const CaseComparison*, const MetricComparison*>> rows;
  for (const CaseComparison& k : c.cases) {
    r.cases.push_back({k.name, k.config_changes, k.not_comparable});
    for (const MetricComparison& m : k.rows) rows.emplace_back(&k, &m);
  }
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return verdict_order(a.second->verdict) < verdict_order(b.second->verdict); });
  for (const auto& [k, m] : rows) {
    ComparisonRowRecord row;
    row.case_name = k->name;
    row.metric = m->metric;
    row.verdict = m->verdict;
    row.acknowledged = m->acknowledged;
    row.baseline_median = m->baseline_median;
    row.candidate_median = m->candidate_median;
    // No number where there is no estimate: a 1.0 would read as "unchanged" (the note says why).
    if (m->estimated) {
      row.ratio = m->ratio;
      row.ratio_low = m->low;
      row.ratio_high = m->high;
      row.p = m->p;
      row.adjusted_p = m->adjusted_p;
    }
    if (!m->judged_by.empty()) {
      row.judged_by = m->judged_by;
      row.judged_verdict = m->judged_verdict;
    }
    row.core_slowdown = m->core_slowdown;
    row.baseline_repetitions = m->baseline_used;
    row.candidate_repetitions = m->candidate_used;
    row.noisy_left_out = m->baseline_noisy + m->candidate_noisy;
    row.repetitions_needed = m->repetitions_needed;
    row.note = m->note;
    r.rows.push_back(std::move(row));
  }
  return r;
}

std::string comparison_record_json(const ComparisonRecord& r) {
  json rows = json::array();
  for (const ComparisonRowRecord& row : r.rows) {
    rows.push_back({{"case", row.case_name},
                    {"metric", row.metric},
                    {"verdict", verdict_name(row.verdict)},
                    {"acknowledged", row.acknowledged},
                    {"baseline_median", optional_number(row.baseline_median)},
                    {"candidate_median", optional_number(row.candidate_median)},
                    {"ratio", optional_number(row.ratio)},
                    {"ratio_low", optional_number(row.ratio_low)},
                    {"ratio_high", optional_number(row.ratio_high)},
                    {"p", optional_number(row.p)},
                    {"adjusted_p", optional_number(row.adjusted_p)},
                    {"judged_by", optional_text(row.judged_by)},
                    {"judged_verdict", row.judged_verdict ? json(verdict_name(*row.judged_verdict)) : json(nullptr)},
                    {"core_slowdown", optional_number(row.core_slowdown)},
                    {"baseline_repetitions", row.baseline_repetitions},
                    {"candidate_repetitions", row.candidate_repetitions},
                    {"noisy_left_out", row.noisy_left_out},
                    {"repetitions_needed", row.repetitions_needed},
                    {"sim_rows", sim_span_rows(row.metric)},
                    {"note", row.note}});
  }
  json cases = json::array();
  for (const ComparisonCaseRecord& k : r.cases) {
    cases.push_back({{"case", k.name}, {"config_changes", k.config_changes}, {"not_comparable", k.not_comparable}});
  }
  return json{{"baseline_run", r.baseline_run},
              {"candidate_run", r.candidate_run},
              {"suite", r.suite},
              {"fdr", r.fdr},
              {"regressed", r.regressed},
              {"failing", r.failing},
              {"unreliable", r.unreliable},
              {"unreliable_judged_by_cpu", r.unreliable_judged_by_cpu},
              {"outcome", r.outcome},
              {"plain_pass", r.plain_pass},
              {"improved", r.improved},
              {"inconclusive", r.inconclusive},
              {"unchanged", r.unchanged},
              {"not_gated", r.not_gated},
              {"caveats", r.caveats},
              {"definition_changed", r.definition_changed ? json{{"from", r.definition_changed->first}, {"to", r.definition_changed->second}}
                                                          : json(nullptr)},
              {"only_in_baseline", r.only_in_baseline},
              {"only_in_candidate", r.only_in_candidate},
              {"cases", cases},
              {"rows", rows}}
      .dump(2);
}

ComparisonRecord parse_comparison_record(std::string_view text, const std::string& where) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw kv::InputError(where, "comparison", std::string("not JSON: ") + e.what());
  }
  if (!j.is_object()) throw kv::InputError(where, "comparison", "not a JSON object");
  ComparisonRecord r;
  r.baseline_run = id_of(j, "baseline_run");
  r.candidate_run = id_of(j, "candidate_run");
  r.suite = text_of(j, "suite").value_or("");
  r.fdr = number_of(j, "fdr").value_or(0.05);
  r.regressed = count_of(j, "regressed", 0);
  // Records stored before acknowledgements existed carry no "failing": every regression fails.
  r.failing = count_of(j, "failing", r.regressed);
  r.unreliable = count_of(j, "unreliable", 0);
  r.unreliable_judged_by_cpu = count_of(j, "unreliable_judged_by_cpu", 0);
  r.outcome = text_of(j, "outcome").value_or("");
  r.plain_pass = j.contains("plain_pass") && j["plain_pass"].is_boolean() && j["plain_pass"].get<bool>();
  r.improved = count_of(j, "improved", 0);
  r.inconclusive = count_of(j, "inconclusive", 0);
  r.unchanged = count_of(j, "unchanged", 0);
  r.not_gated = count_of(j, "not_gated", 0);
  r.caveats = texts_of(j, "caveats");
  if (j.contains("definition_changed") && j["definition_changed"].is_object()) {
    const json& change = j["definition_changed"];
    r.definition_changed = std::pair{count_of(change, "from", 0), count_of(change, "to", 0)};
  }
  r.only_in_baseline = texts_of(j, "only_in_baseline");
  r.only_in_candidate = texts_of(j, "only_in_candidate");
  if (j.contains("cases") && j["cases"].is_array()) {
    for (const json& k : j["cases"]) {
      if (k.is_object()) r.cases.push_back({text_of(k, "case").value_or(""), texts_of(k, "config_changes"), text_of(k, "not_comparable").value_or("")});
    }
  }
  if (j.contains("rows") && j["rows"].is_array()) {
    std::size_t index = 0;
    for (const json& x : j["rows"]) {
      const std::string field = "rows[" + std::to_string(index++) + "]";
      if (!x.is_object()) continue;
      ComparisonRowRecord row;
      row.case_name = text_of(x, "case").value_or("");
      row.metric = text_of(x, "metric").value_or("");
      const std::optional<Verdict> verdict = verdict_of(x, "verdict", where, field);
      if (!verdict) throw kv::InputError(where, field + ".verdict", "missing: every row carries its verdict");
      row.verdict = *verdict;
      row.acknowledged = text_of(x, "acknowledged").value_or("");
      row.baseline_median = number_of(x, "baseline_median");
      row.candidate_median = number_of(x, "candidate_median");
      row.ratio = number_of(x, "ratio");
      row.ratio_low = number_of(x, "ratio_low");
      row.ratio_high = number_of(x, "ratio_high");
      row.p = number_of(x, "p");
      row.adjusted_p = number_of(x, "adjusted_p");
      row.judged_by = text_of(x, "judged_by");
      row.judged_verdict = verdict_of(x, "judged_verdict", where, field);
      row.core_slowdown = number_of(x, "core_slowdown");
      row.baseline_repetitions = count_of(x, "baseline_repetitions", 0);
      row.candidate_repetitions = count_of(x, "candidate_repetitions", 0);
      row.noisy_left_out = count_of(x, "noisy_left_out", 0);
      row.repetitions_needed = count_of(x, "repetitions_needed", 0);
      row.note = text_of(x, "note").value_or("");
      r.rows.push_back(std::move(row));
    }
  }
  return r;
}

}  // namespace kvbench
