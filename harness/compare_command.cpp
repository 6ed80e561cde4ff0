#include "compare_command.h"

#include "comparison_record.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "builtin_gate_rules.h"
#include "cli.h"
#include "cli_checks.h"
#include "gate_markdown.h"
#include "human_units.h"
#include "model_loader.h"
#include "runtime/error.h"

namespace kvbench {

namespace {

using json = nlohmann::json;

// Sim rows are counts gated to a fraction of a percent: printed whole, so both counts say it.
bool counted(const std::string& metric) {
  const std::optional<MetricKey> key = parse_metric_key(metric);
  return key && key->clock == Clock::Sim;
}

std::string value_text(const std::optional<double>& v, const std::string& metric) {
  return v && counted(metric) ? grouped_count(*v) : metric_value_text(v, metric);
}

std::string percent(double ratio) { return fmt::format("{:+.1f}%", (ratio - 1.0) * 100.0); }

// A change in percent with the digits it needs to show that it is not zero (one decimal at least).
std::string percent_shown(double ratio) {
  const double pct = (ratio - 1.0) * 100.0;
  int decimals = 1;
  while (decimals < 15 && pct != 0.0 && std::fabs(pct) < 0.5 * std::pow(10.0, 1 - decimals)) ++decimals;
  return fmt::format("{:+.{}f}%", pct, decimals);
}

// A row's two medians as printed: in human units, with more digits where those would read the
// same for values that differ (a change the gate acts on is always visible).
std::pair<std::string, std::string> median_texts(const ComparisonRowRecord& r) {
  std::pair<std::string, std::string> texts{value_text(r.baseline_median, r.metric), value_text(r.candidate_median, r.metric)};
  if (!r.baseline_median || !r.candidate_median || *r.baseline_median == *r.candidate_median || texts.first != texts.second) return texts;
  const MetricDef* def = find_metric_key(r.metric);
  const std::string unit = def != nullptr && def->unit != "ratio" && def->unit != "count" ? " " + def->unit : "";
  // Fixed notation (never an exponent), one more decimal at a time.
  const double magnitude = std::max(std::fabs(*r.baseline_median), std::fabs(*r.candidate_median));
  const int integer_digits = magnitude >= 1.0 ? static_cast<int>(std::floor(std::log10(magnitude))) + 1 : 1;
  for (int decimals = 0; decimals <= 17 - std::min(integer_digits, 17); ++decimals) {
    texts = {fmt::format("{:.{}f}{}", *r.baseline_median, decimals, unit), fmt::format("{:.{}f}{}", *r.candidate_median, decimals, unit)};
    if (texts.first != texts.second) break;
  }
  return texts;
}

// The estimate the row was judged on: for statistical rows the ratio of geometric means with
// its 95% interval ("+14.6% [+9.8%, +19.6%] p=0.0004"), for deterministic ones the change of
// the value; "no estimate" where there is none (the note says why).
std::string change_text(const ComparisonRowRecord& r) {
  if (!r.estimated()) return "no estimate";
  if (!r.baseline_median || !r.candidate_median) return "";
  if (r.statistical()) {
    return fmt::format("{} [{}, {}] p={}", percent(*r.ratio), percent(*r.ratio_low), percent(*r.ratio_high), significant(r.adjusted_p.value_or(1.0), 2));
  }
  const double base = *r.baseline_median, cand = *r.candidate_median;
  if (counted(r.metric) && base != 0.0) {
    return fmt::format("{}{} ({})", cand >= base ? "+" : "-", grouped_count(std::fabs(cand - base)), percent_shown(cand / base));
  }
  return base != 0.0 ? percent_shown(cand / base) : (cand == 0.0 ? "+0.0%" : "new");
}

std::string summary_line(const ComparisonRecord& c) {
  const int acknowledged = c.regressed - c.failing;
  return fmt::format("{} regressed{}, {} unreliable{}, {} improved, {} inconclusive, {} unchanged, {} not gated", c.regressed,
                     acknowledged > 0 ? fmt::format(" ({} acknowledged)", acknowledged) : "", c.unreliable + c.unreliable_judged_by_cpu,
                     c.unreliable_judged_by_cpu > 0 ? fmt::format(" ({} judged by their CPU-time rows)", c.unreliable_judged_by_cpu) : "",
                     c.improved, c.inconclusive, c.unchanged, c.not_gated);
}

std::string xml_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string verdict_text(const ComparisonRowRecord& r) {
  const std::string verdict = verdict_name(r.verdict);
  if (r.judged_by) return verdict + " (judged by " + *r.judged_by + ": " + verdict_name(r.judged_verdict.value_or(Verdict::Unreliable)) + ")";
  return r.acknowledged.empty() ? verdict : verdict + " (acknowledged)";
}

std::string row_line(const ComparisonRowRecord& r) {
  std::string note = r.note;
  if (!r.acknowledged.empty()) note = r.acknowledged + (note.empty() ? "" : "; " + note);
  if (r.core_slowdown) {
    const std::string speed = fmt::format("CPU time at the baseline's core speed: the core-speed probe took {:+.1f}% in the candidate",
                                          (*r.core_slowdown - 1.0) * 100.0);
    note = note.empty() ? speed : note + "; " + speed;
  }
  const auto [base, cand] = median_texts(r);
  return fmt::format("{} {} {}: {} -> {} {}{}", verdict_text(r), r.case_name, r.metric, base, cand, change_text(r), note.empty() ? "" : " (" + note + ")");
}

RunComparison run_comparison(const CompareCommandOptions& o, ResultsStore& store, const LoadedRules& loaded) {
  if (o.baseline.empty()) throw kv::InputError("--baseline", "", "is required (a run id, latest, latest:TAG, latest:suite=NAME or a baseline name)");
  if (o.candidate.empty()) throw kv::InputError("--candidate", "", "is required (a run id, latest, latest:TAG, latest:suite=NAME or a baseline name)");
  const std::int64_t base = resolve_run(store, o.baseline, "--baseline");
  const std::int64_t cand = resolve_run(store, o.candidate, "--candidate");
  return compare_runs(store, base, cand, loaded.rules, {o.require_same_config, o.allow_machine_change});
}

// Written beside the target and renamed: never a half-written report.
void write_file_atomically(const std::string& path, const std::string& text, const char* flag) {
  const std::string partial = path + ".partial";
  {
    std::ofstream file(partial, std::ios::binary);
    file << text;
    if (!file.flush()) throw kv::InputError(path, flag, "cannot write");
  }
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  if (ec) throw kv::InputError(path, flag, "cannot write: " + ec.message());
}

}  // namespace

void print_baselines(ResultsStore& store, bool as_json, std::FILE* out) {
  const auto baselines = list_baselines(store);
  if (as_json) {
    nlohmann::json array = nlohmann::json::array();
    for (const BaselineRecord& b : baselines) array.push_back({{"name", b.name}, {"run", b.run_id}, {"set_at", b.set_at}, {"reason", b.reason}});
    fmt::print(out, "{}\n", array.dump(2));
    return;
  }
  fmt::print(out, "{:<24} {:>5}  {:<20}  {}\n", "baseline", "run", "set", "reason");
  for (const BaselineRecord& b : baselines) fmt::print(out, "{:<24} {:>5}  {:<20}  {}\n", b.name, b.run_id, b.set_at, b.reason);
  if (baselines.empty()) fmt::print(out, "(no baselines; `kvbench baseline set NAME RUN`)\n");
}

void print_acks(ResultsStore& store, bool as_json, std::FILE* out) {
  const auto acks = list_acks(store);
  if (as_json) {
    nlohmann::json array = nlohmann::json::array();
    for (const AckRow& a : acks) {
      array.push_back({{"id", a.id}, {"run", a.run_id}, {"baseline_run", a.baseline_run}, {"metric", a.metric_glob}, {"cases", a.case_glob},
                       {"created_at", a.created_at}, {"reason", a.reason}});
    }
    fmt::print(out, "{}\n", array.dump(2));
    return;
  }
  fmt::print(out, "{:>4}  {:>5}  {:>8}  {:<24} {:<28} {:<20}  {}\n", "ack", "run", "baseline", "metric", "cases", "created", "reason");
  for (const AckRow& a : acks) {
    fmt::print(out, "{:>4}  {:>5}  {:>8}  {:<24} {:<28} {:<20}  {}\n", a.id, a.run_id, a.baseline_run, a.metric_glob, a.case_glob, a.created_at,
               a.reason);
  }
  if (acks.empty()) fmt::print(out, "(no acknowledgements)\n");
}

namespace {

int run_baseline(const CompareCommandOptions& o) {
  if (o.set->parsed()) {
    ResultsStore store(o.db);
    const std::int64_t id = resolve_run(store, o.run, "RUN");
    const RunRecord run = get_run(store, id, "RUN");
    if (run.status != "complete") {
      throw kv::InputError("RUN", o.run, fmt::format("run {} is {}; only complete runs can be baselines", id, run.status));
    }
    store.set_baseline(o.name, id, o.reason);
    fmt::print("baseline {} -> run {} (suite {}, {})\n", o.name, id, run.suite, run.started_at);
    return kExitOk;
  }
  if (o.rm->parsed()) {
    ResultsStore store(o.db);
    if (!store.remove_baseline(o.name)) throw kv::InputError(o.db, "NAME", "no baseline named '" + o.name + "'");
    fmt::print("baseline {} removed\n", o.name);
    return kExitOk;
  }
  ResultsStore store(o.db, Access::ReadOnly);
  if (o.show->parsed()) {
    const auto b = find_baseline(store, o.name);
    if (!b) throw kv::InputError(o.db, "NAME", "no baseline named '" + o.name + "' (`kvbench baseline list`)");
    const RunRecord run = get_run(store, b->run_id);
    fmt::print("baseline {}\n  run {} [{}] suite {}, {} -> {}\n  git {}{}, config {}\n  set {}{}\n", b->name, run.id, run.status, run.suite,
               run.started_at, run.ended_at, run.git_sha, run.git_dirty ? " (dirty)" : "", run.config_hash, b->set_at,
               b->reason.empty() ? "" : ": " + b->reason);
    return kExitOk;
  }
  print_baselines(store, false, stdout);
  return kExitOk;
}

int run_ack(const CompareCommandOptions& o) {
  if (o.ack_list->parsed()) {
    ResultsStore store(o.db, Access::ReadOnly);
    print_acks(store, false, stdout);
    return kExitOk;
  }
  ResultsStore store(o.db);
  if (o.ack_rm->parsed()) {
    if (!store.remove_ack(o.ack_id)) throw kv::InputError(o.db, "ACK_ID", fmt::format("no acknowledgement {}", o.ack_id));
    fmt::print("acknowledgement {} removed\n", o.ack_id);
    return kExitOk;
  }
  if (o.ack_run.empty()) throw kv::InputError("--run", "", "is required (the candidate run whose regression is accepted)");
  if (o.ack_metric.empty()) throw kv::InputError("--metric", "", "is required (a metric name, `kvbench metrics`)");
  if (o.ack_reason.empty()) throw kv::InputError("--reason", "", "is required: say why the regression is accepted");
  // A glob (`attn_*`, `*@model`) must match some metric key: a typo would accept nothing.
  int matched = 0;
  for (const MetricDef& def : metric_table()) {
    for (const std::string& key : {def.name, def.modelled ? metric_key(def.name, Clock::Model) : std::string()}) {
      matched += !key.empty() && ::fnmatch(o.ack_metric.c_str(), key.c_str(), 0) == 0 ? 1 : 0;
    }
  }
  if (matched == 0) {
    throw kv::InputError("--metric", o.ack_metric,
                         "matches no metric (`kvbench metrics` lists them; NAME@model for a modelled figure; globs take * ? [...])");
  }
  const std::int64_t run = resolve_run(store, o.ack_run, "--run");
  std::int64_t baseline = 0;
  if (!o.ack_baseline.empty()) {
    baseline = resolve_run(store, o.ack_baseline, "--baseline");
  } else {
    // The baseline of the last gate this run was the candidate of.
    const auto verdicts = list_verdicts(store, run);
    if (verdicts.empty()) throw kv::InputError("--run", o.ack_run, fmt::format("run {} has no gate verdict; give --baseline", run));
    baseline = verdicts.back().baseline_run;
  }
  const std::int64_t id = store.add_ack(run, baseline, o.ack_case, o.ack_metric, o.ack_reason);
  fmt::print("acknowledgement {}: {}{} of {} accepted in run {} against run {} (and in later candidates against it): {}\n", id,
             o.ack_metric, matched > 1 ? fmt::format(" ({} metrics)", matched) : "", o.ack_case, run, baseline, o.ack_reason);
  return kExitOk;
}

}  // namespace

LoadedRules load_gate_rules(const std::string& path) {
  LoadedRules loaded;
  loaded.text = path.empty() ? std::string(kBuiltinGateRules) : read_text_file(path, "--rules");
  loaded.rules = parse_gate_rules(loaded.text, path.empty() ? "builtin:configs/gate.json" : path);
  return loaded;
}

std::string comparison_table(const ComparisonRecord& c, bool all, HostTimingTest test) {
  std::ostringstream out;
  out << fmt::format("candidate run {} against baseline run {} (suite {})\n", c.candidate_run, c.baseline_run, c.suite);
  for (const std::string& caveat : c.caveats) out << "caveat: " << caveat << "\n";
  int noisy = 0, used = 0;
  for (const ComparisonRowRecord& r : c.rows) {
    noisy += r.noisy_left_out;
    used += r.baseline_repetitions + r.candidate_repetitions;
  }
  for (const ComparisonRowRecord& r : c.rows) {
    if (!all && (r.verdict == Verdict::Unchanged || r.verdict == Verdict::NotGated)) continue;
    out << row_line(r) << "\n";
  }
  for (const ComparisonCaseRecord& k : c.cases) {
    for (const std::string& change : k.config_changes) out << "config changed " << k.name << ": " << change << "\n";
    if (!k.not_comparable.empty()) out << "not comparable " << k.name << ": " << k.not_comparable << " (not gated)\n";
  }
  for (const std::string& name : c.only_in_baseline) out << "only in the baseline: " << name << "\n";
  for (const std::string& name : c.only_in_candidate) out << "only in the candidate: " << name << "\n";
  // Paired (compare_paired_samples): a row with a zero timing, or with sides of unequal length,
  // falls back to compare_samples' Welch; the line names the test every other row had.
  const char* const host_test = test == HostTimingTest::Paired ? "paired t-test on the per-pair log ratios" : "Welch on log values";
  out << fmt::format("{} (host timings: {}, Benjamini-Hochberg at FDR {}; noisy repetitions left out: {} of {})\n", summary_line(c),
                     host_test, c.fdr, noisy, noisy + used);
  return out.str();
}

// The gate's outcome in a word or two, as a headline.
std::string outcome_headline(const ComparisonRecord& c, const GateStrictness& strictness) {
  if (c.definition_changed) return "needs a baseline";
  if (c.failing > 0) return "FAIL";
  if (c.unreliable > 0) return strictness.unreliable_fails ? "UNRELIABLE" : "pass (unreliable rows passed by --unreliable=pass)";
  if (c.inconclusive > 0) return strictness.inconclusive_fails ? "FAIL (inconclusive)" : "pass (with inconclusive rows)";
  return "pass";
}

std::string comparison_markdown(const ComparisonRecord& c, const GateStrictness& strictness) {
  GateMarkdown md;
  md.outcome = outcome_headline(c, strictness);
  md.candidate_run = c.candidate_run;
  md.baseline_run = c.baseline_run;
  md.suite = c.suite;
  md.counts = summary_line(c);
  md.caveats = c.caveats;
  md.undecided = {c.unreliable, c.unreliable_judged_by_cpu, c.inconclusive, strictness.unreliable_fails, strictness.inconclusive_fails};
  for (const ComparisonCaseRecord& k : c.cases) {
    for (const std::string& change : k.config_changes) md.config_changes.emplace_back(k.name, change);
  }
  for (const ComparisonRowRecord& r : c.rows) {
    const auto [base, cand] = median_texts(r);
    md.rows.push_back({r.verdict == Verdict::Regressed, r.unreliable(), verdict_text(r), r.case_name, r.metric, base, cand, change_text(r),
                       r.acknowledged.empty() ? r.note : r.acknowledged});
  }
  md.only_in_baseline = c.only_in_baseline;
  md.only_in_candidate = c.only_in_candidate;
  return render_gate_markdown(md);
}

// A test suite per case, in case order; its test cases in the record's order (failures first).
// A regressed row is a failure of its own (type "regressed"). A row the gate left undecided -
// unreliable or inconclusive - or an acknowledged regression is a skipped test case carrying its
// line, never a failure one by one: when undecided rows fail the gate (--unreliable=fail,
// --inconclusive=fail) or the benchmark definition changed, one test case of the suite
// "kvbench gate" fails for all of them (type "unreliable", "inconclusive" or "needs-baseline")
// and lists them. A dashboard then counts one failure per regression, plus one per such reason.
std::string comparison_junit(const ComparisonRecord& c, const GateStrictness& strictness) {
  std::map<std::string, std::vector<const ComparisonRowRecord*>> by_case;
  for (const ComparisonRowRecord& r : c.rows) by_case[r.case_name].push_back(&r);
  std::ostringstream suites;
  int tests = 0, failures = 0;
  std::vector<const ComparisonRowRecord*> unreliable, inconclusive;
  for (const ComparisonCaseRecord& k : c.cases) {
    std::ostringstream cases;
    int case_tests = 0, case_failures = 0, skipped = 0;
    for (const ComparisonRowRecord* r : by_case[k.name]) {
      if (r->verdict == Verdict::NotGated) continue;
      ++case_tests;
      const std::string line = row_line(*r);
      cases << fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"0\">", xml_escape(k.name), xml_escape(r->metric));
      if (r->failing()) {
        ++case_failures;
        cases << fmt::format("\n      <failure message=\"{}\" type=\"regressed\">{}</failure>\n    ", xml_escape(line), xml_escape(line));
      } else if (r->unreliable() || r->verdict == Verdict::Inconclusive || r->verdict == Verdict::Regressed) {
        if (r->unreliable()) unreliable.push_back(r);
        if (r->verdict == Verdict::Inconclusive) inconclusive.push_back(r);
        ++skipped;
        cases << fmt::format("\n      <skipped message=\"{}\"/>\n    ", xml_escape(line));
      }
      cases << "</testcase>\n";
    }
    tests += case_tests;
    failures += case_failures;
    suites << fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\" errors=\"0\">\n{}  </testsuite>\n",
                          xml_escape(k.name), case_tests, case_failures, skipped, cases.str());
  }
  // The gate's own reasons to fail beside regressions, one test case each.
  std::ostringstream gate_cases;
  int gate_tests = 0, gate_failures = 0;
  const auto reason = [&](const char* name, const char* type, const std::string& message, const std::vector<const ComparisonRowRecord*>& rows,
                          bool fails) {
    ++gate_tests;
    std::string body = message;
    for (const ComparisonRowRecord* r : rows) body += "\n" + row_line(*r);
    gate_cases << fmt::format("    <testcase classname=\"kvbench gate\" name=\"{}\" time=\"0\">", name);
    if (fails) {
      ++gate_failures;
      gate_cases << fmt::format("\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    ", xml_escape(message), type, xml_escape(body));
    } else if (!rows.empty()) {
      gate_cases << fmt::format("\n      <skipped message=\"{}\"/>\n    ", xml_escape(message));
    }
    gate_cases << "</testcase>\n";
  };
  if (c.definition_changed) {
    reason("benchmark definition", "needs-baseline",
           fmt::format("the benchmark definition changed v{} -> v{}: exact and modelled rows need a new baseline", c.definition_changed->first,
                       c.definition_changed->second),
           {}, true);
  }
  reason("unreliable rows", "unreliable",
         fmt::format("{} row{} that noise or too few repetitions left undecided, with no CPU-time row that settled them{}", unreliable.size(),
                     unreliable.size() == 1 ? "" : "s", strictness.unreliable_fails ? "" : " (passed by --unreliable=pass)"),
         unreliable, strictness.unreliable_fails && !unreliable.empty());
  reason("inconclusive rows", "inconclusive",
         fmt::format("{} row{} whose interval crosses the threshold band{}", inconclusive.size(), inconclusive.size() == 1 ? "" : "s",
                     strictness.inconclusive_fails ? "" : " (passed: --inconclusive=fail fails them)"),
         inconclusive, strictness.inconclusive_fails && !inconclusive.empty());
  suites << fmt::format("  <testsuite name=\"kvbench gate\" tests=\"{}\" failures=\"{}\" errors=\"0\">\n{}  </testsuite>\n", gate_tests,
                        gate_failures, gate_cases.str());
  return fmt::format("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"kvbench gate: run {} against run {}\" tests=\"{}\" "
                     "failures=\"{}\">\n{}</testsuites>\n",
                     c.candidate_run, c.baseline_run, tests + gate_tests, failures + gate_failures, suites.str());
}

void add_compare_commands(CLI::App& app, CompareCommandOptions& o) {
  o.baseline_cmd = app.add_subcommand("baseline", "Name runs as baselines: set, list, show, rm");
  o.baseline_cmd->require_subcommand(1);
  o.set = o.baseline_cmd->add_subcommand("set", "Point a baseline name at a complete run");
  o.set->add_option("NAME", o.name, "baseline name")->required();
  o.set->add_option("RUN", o.run, "run selector: id, latest, latest:TAG, latest:suite=NAME or a baseline name")->required();
  o.set->add_option("--reason", o.reason, "why this run is the baseline");
  o.list = o.baseline_cmd->add_subcommand("list", "Every baseline and its run");
  o.show = o.baseline_cmd->add_subcommand("show", "A baseline's run");
  o.show->add_option("NAME", o.name, "baseline name")->required();
  o.rm = o.baseline_cmd->add_subcommand("rm", "Remove a baseline name (the run stays)");
  o.rm->add_option("NAME", o.name, "baseline name")->required();
  for (CLI::App* sub : {o.set, o.list, o.show, o.rm}) add_db_option(sub, "--db", o.db, "results database")->capture_default_str();

  o.ack = app.add_subcommand("ack", "Accept a regression: it stops failing the gate for that candidate and later ones against its baseline");
  o.ack->require_subcommand(0, 1);
  o.ack->add_option("--run", o.ack_run, "the candidate run whose regression is accepted (a run selector)");
  o.ack->add_option("--metric", o.ack_metric, "the metric key, or a glob over metric keys (attn_*, *@model)");
  o.ack->add_option("--case", o.ack_case, "the cases, a glob over model/workload/policy/soc")->capture_default_str();
  o.ack->add_option("--reason", o.ack_reason, "why it is accepted (kept and shown with the row)");
  o.ack->add_option("--baseline", o.ack_baseline, "the baseline it regressed against (default: that of the run's last gate)");
  o.ack_list = o.ack->add_subcommand("list", "Every acknowledgement");
  o.ack_rm = o.ack->add_subcommand("rm", "Remove an acknowledgement");
  o.ack_rm->add_option("ACK_ID", o.ack_id, "its id (`kvbench ack list`)")->required();
  for (CLI::App* cmd : {o.ack, o.ack_list, o.ack_rm}) add_db_option(cmd, "--db", o.db, "results database")->capture_default_str();

  const auto common = [&](CLI::App* cmd) {
    cmd->add_option("--baseline", o.baseline, "baseline run selector: id, latest, latest:TAG, latest:suite=NAME or a baseline name")->required();
    cmd->add_option("--candidate", o.candidate, "candidate run selector (the same forms)")->required();
    add_db_option(cmd, "--db", o.db, "results database")->capture_default_str();
    cmd->add_option("--rules", o.rules, "gate rules JSON (default: the built-in configs/gate.json)");
    cmd->add_flag("--require-same-config", o.require_same_config, "refuse case pairs whose resolved configuration differs");
    cmd->add_flag("--allow-machine-change", o.allow_machine_change, "gate host timings across CPUs or kernel paths (with a caveat)");
  };
  o.compare = app.add_subcommand("compare", "A candidate run against a baseline, row by (case, metric) (read-only)");
  common(o.compare);
  o.compare->add_option("--format", o.format, "table, json, markdown or junit")->check(CLI::IsMember({"table", "json", "markdown", "junit"}))
      ->capture_default_str();
  o.compare->add_flag("--all", o.all, "table: unchanged and not-gated rows too");
  o.gate = app.add_subcommand("gate", "compare, store the verdict, exit 1 on a regression (5: unreliable, 4: inconclusive with --inconclusive=fail, 6: benchmark definition changed)");
  common(o.gate);
  o.gate->add_option("--junit", o.junit, "write a JUnit XML report");
  o.gate->add_option("--markdown", o.markdown, "write a Markdown summary (a PR comment)");
  o.gate->add_option("--json", o.json, "write the comparison as JSON");
  o.gate->add_option("--inconclusive", o.inconclusive, "pass (with a warning) or fail (exit 4)")->check(CLI::IsMember({"pass", "fail"}))->capture_default_str();
  o.gate->add_option("--unreliable", o.unreliable,
                     "rows noise or too few repetitions left undecided: fail (exit 5) or pass (with a warning)")
      ->check(CLI::IsMember({"pass", "fail"}))
      ->capture_default_str();
}

bool run_compare_commands(const CompareCommandOptions& o, int& exit_code) {
  if (o.ack->parsed()) {
    exit_code = run_ack(o);
    return true;
  }
  if (o.baseline_cmd->parsed()) {
    exit_code = run_baseline(o);
    return true;
  }
  if (o.compare->parsed()) {
    ResultsStore store(o.db, Access::ReadOnly);
    const ComparisonRecord c = comparison_record(run_comparison(o, store, load_gate_rules(o.rules)));
    if (o.format == "json") fmt::print("{}\n", comparison_record_json(c));
    else if (o.format == "markdown") fmt::print("{}", comparison_markdown(c));
    else if (o.format == "junit") fmt::print("{}", comparison_junit(c, GateStrictness{}));
    else fmt::print("{}", comparison_table(c, o.all));
    exit_code = kExitOk;
    return true;
  }
  if (!o.gate->parsed()) return false;
  ResultsStore store(o.db);
  // The rules are read once: the verdict stores the text that was applied.
  const LoadedRules loaded = load_gate_rules(o.rules);
  const ComparisonRecord c = comparison_record(run_comparison(o, store, loaded));
  const bool inconclusive_fails = o.inconclusive == "fail";
  const GateStrictness strictness{inconclusive_fails, o.unreliable == "fail"};
  // Every file first: a gate that cannot write its report stores no verdict.
  if (!o.junit.empty()) write_file_atomically(o.junit, comparison_junit(c, strictness), "--junit");
  if (!o.markdown.empty()) write_file_atomically(o.markdown, comparison_markdown(c, strictness), "--markdown");
  const std::string record_json = comparison_record_json(c);
  if (!o.json.empty()) write_file_atomically(o.json, record_json, "--json");
  ResultsStore::VerdictRecord verdict;
  verdict.baseline_run = c.baseline_run;
  verdict.candidate_run = c.candidate_run;
  verdict.outcome = comparison_outcome(c, inconclusive_fails);
  verdict.regressed = c.failing;
  verdict.improved = c.improved;
  verdict.inconclusive = c.inconclusive;
  verdict.rules_json = loaded.text;
  verdict.rows_json = record_json;
  store.add_verdict(verdict);
  fmt::print("{}", comparison_table(c, false));
  if (c.definition_changed) {
    // Exact and modelled figures moved by design: only a new baseline can gate them again.
    fmt::print("gate: needs a baseline (benchmark definition changed v{} -> v{})\n", c.definition_changed->first,
               c.definition_changed->second);
    // Measured rows are still compared across definitions: a slowdown must not ride on the bump.
    if (verdict.regressed > 0) {
      fmt::print("gate: {} measured rows regressed as well (listed above): look at them before setting the new baseline\n",
                 verdict.regressed);
    }
    exit_code = kExitNeedsBaseline;
  } else if (verdict.regressed > 0) {
    fmt::print("gate: FAIL ({} regressed, not acknowledged)\n", verdict.regressed);
    exit_code = kExitRunFailed;
  } else if (c.unreliable > 0 && strictness.unreliable_fails) {
    fmt::print("gate: UNRELIABLE ({} rows that noise or too few repetitions left undecided, with no CPU-time row that "
               "settled them; --unreliable=pass lets them pass)\n",
               c.unreliable);
    exit_code = kExitUnreliable;
  } else if (verdict.inconclusive > 0 && inconclusive_fails) {
    fmt::print("gate: FAIL ({} inconclusive, --inconclusive=fail)\n", verdict.inconclusive);
    exit_code = kExitInconclusive;
  } else {
    // What it let pass, as the Markdown's headline says it: the rows are listed above.
    std::vector<std::string> passed;
    if (c.unreliable > 0) passed.push_back(fmt::format("{} unreliable row{} passed by --unreliable=pass", c.unreliable, c.unreliable == 1 ? "" : "s"));
    if (verdict.inconclusive > 0) {
      passed.push_back(fmt::format("{} inconclusive row{}: their intervals cross the band", verdict.inconclusive, verdict.inconclusive == 1 ? "" : "s"));
    }
    fmt::print("gate: pass{}\n", passed.empty() ? "" : fmt::format(" ({}; listed above)", fmt::join(passed, "; ")));
    exit_code = kExitOk;
  }
  return true;
}

}  // namespace kvbench
