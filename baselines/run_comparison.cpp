#include "run_comparison.h"

#include <fmt/format.h>
#include <fnmatch.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "runtime/error.h"
#include "statistics.h"

namespace kvbench {

namespace {

using json = nlohmann::json;

// Earlier runs the between-run variance is estimated from, at most.
constexpr std::size_t kEarlierRuns = 10;

// The named entry of one of the resolved configuration's arrays.
json entry(const json& config, const char* array, const std::string& name) {
  if (config.contains(array) && config[array].is_array()) {
    for (const json& e : config[array]) {
      if (e.is_object() && e.value("name", "") == name) return e;
    }
  }
  return json::object();
}

// Every difference between two configuration objects as "path: old -> new". A field present on
// one side only is one change however many fields it holds (a block a newer kvbench records,
// such as a model's `synthetic`, is one line, not one per knob).
void diff(const json& a, const json& b, const std::string& prefix, std::vector<std::string>& changes) {
  const auto shown = [](const json& j) {
    return j.is_object() && j.size() > 3 ? fmt::format("{{{} fields}}", j.size()) : j.dump();
  };
  if (a.is_object() && b.is_object()) {
    for (const auto& [key, value] : a.items()) {
      const std::string path = prefix.empty() ? key : prefix + "." + key;
      if (b.contains(key)) {
        diff(value, b.at(key), path, changes);
      } else {
        changes.push_back(fmt::format("{}: {} -> (absent)", path, shown(value)));
      }
    }
    for (const auto& [key, value] : b.items()) {
      if (!a.contains(key)) changes.push_back(fmt::format("{}: (absent) -> {}", prefix.empty() ? key : prefix + "." + key, shown(value)));
    }
    return;
  }
  if (a.dump() != b.dump()) changes.push_back(fmt::format("{}: {} -> {}", prefix, a.dump(), b.dump()));
}

// "models.sample_layers: 2 -> 4" for every field of the case's model, workload and policy
// that differs, and the seed and warmup. Per-run fields (benchmark_definition among them) are
// not a case's change: compare_runs says a changed definition once, as a caveat.
std::vector<std::string> config_changes(const json& base, const json& cand, const CaseSamples& c) {
  json a = json::object(), b = json::object();
  for (const auto& [array, name] : {std::pair<const char*, std::string>{"models", c.model}, {"workloads", c.workload}, {"policies", c.policy}}) {
    a[array] = entry(base, array, name);
    b[array] = entry(cand, array, name);
  }
  for (const char* top : {"seed", "warmup"}) {
    if (base.contains(top)) a[top] = base[top];
    if (cand.contains(top)) b[top] = cand[top];
  }
  std::vector<std::string> changes;
  diff(a, b, "", changes);
  std::sort(changes.begin(), changes.end());
  return changes;
}

// The machine whose clock a run's host timings are on: its CPU, and its board (two boards with
// the same cores are two machines). Runs stored before boards were recorded name none: a board
// tells machines apart only when both runs name one.
struct Machine {
  std::string cpu, board;
};
Machine run_machine(const RunRecord& run) { return {run_meta_text(run, "cpu_model"), run_meta_text(run, "board")}; }
bool same_machine(const Machine& a, const Machine& b) {
  return a.cpu == b.cpu && (a.board.empty() || b.board.empty() || a.board == b.board);
}

void require_complete(const RunRecord& run, const char* role) {
  if (run.status != "complete") {
    throw kv::InputError(role, std::to_string(run.id),
                         fmt::format("run {} is {}; only complete runs can be {}", run.id, run.status,
                                     std::string(role) == "--baseline" ? "baselines" : "candidates"));
  }
}

// The core-speed probe's metric (harness/cpu_probe.h).
constexpr const char* kCoreProbe = "noise_cpu_probe_ms";

// One case's probes and which repetitions to judge at the baseline's median probe speed: those
// of two runs (or, paired, of two repetitions) that did not share their conditions, one noisy
// and the other quiet. Repetitions that are all quiet, or all noisy alike, keep their CPU time
// as measured: rescaling them would add the probe's own scatter and take out nothing.
struct CoreSpeed {
  bool rescale = false;
  std::vector<Sample> base, cand;  // the probes, with the reference where a repetition stays as measured
  double reference = 0.0;          // the baseline's median probe, ms
  double slowdown = 1.0;           // the candidate's median probe / the reference
};

CoreSpeed core_speed(const CaseSamples& base, const CaseSamples& cand, bool paired) {
  CoreSpeed speed;
  const auto probes = [](const CaseSamples& s) {
    const auto it = s.samples.find(kCoreProbe);
    return it == s.samples.end() ? std::vector<Sample>{} : it->second;
  };
  speed.base = probes(base);
  speed.cand = probes(cand);
  if (speed.base.empty() || speed.cand.empty()) return speed;  // runs from before the probe
  const auto median_of = [](const std::vector<Sample>& v) {
    std::vector<double> values;
    for (const Sample& s : v) values.push_back(s.value);
    return median(values);
  };
  speed.reference = median_of(speed.base);
  if (!(speed.reference > 0.0)) return speed;
  speed.slowdown = median_of(speed.cand) / speed.reference;
  if (paired) {
    if (speed.base.size() != speed.cand.size()) return speed;
    for (std::size_t i = 0; i < speed.base.size(); ++i) {
      if (speed.base[i].noisy != speed.cand[i].noisy) {
        speed.rescale = true;
      } else {
        speed.base[i].value = speed.cand[i].value = speed.reference;
      }
    }
    return speed;
  }
  const auto count_noisy = [](const std::vector<Sample>& v) {
    return std::count_if(v.begin(), v.end(), [](const Sample& s) { return s.noisy; });
  };
  const std::size_t noisy = static_cast<std::size_t>(count_noisy(speed.base) + count_noisy(speed.cand));
  speed.rescale = noisy > 0 && noisy < speed.base.size() + speed.cand.size();
  return speed;
}

}  // namespace

int RunComparison::count(Verdict verdict) const {
  int n = 0;
  for (const CaseComparison& c : cases) {
    for (const MetricComparison& row : c.rows) n += row.verdict == verdict ? 1 : 0;
  }
  return n;
}

int RunComparison::unreliable() const {
  int n = 0;
  for (const CaseComparison& c : cases) {
    for (const MetricComparison& row : c.rows) n += row.verdict == Verdict::Unreliable && row.judged_by.empty() ? 1 : 0;
  }
  return n;
}

int RunComparison::failing() const {
  int n = 0;
  for (const CaseComparison& c : cases) {
    for (const MetricComparison& row : c.rows) n += row.verdict == Verdict::Regressed && row.acknowledged.empty() ? 1 : 0;
  }
  return n;
}

int run_benchmark_definition(const RunRecord& run) {
  const json config = json::parse(run.config_json, nullptr, false);
  if (!config.is_object() || !config.contains("benchmark_definition")) return 1;
  const json& version = config["benchmark_definition"];
  if (!version.is_number_integer() || version.get<std::int64_t>() < 1 || version.get<std::int64_t>() > 1000000) {
    throw kv::InputError(fmt::format("run {}", run.id), "config_json/benchmark_definition",
                         fmt::format("{} is not a benchmark definition version (a positive integer)", version.dump()));
  }
  return version.get<int>();
}

std::vector<std::string> case_config_changes(const RunRecord& base, const RunRecord& cand, const CaseSamples& c) {
  return config_changes(json::parse(base.config_json, nullptr, false), json::parse(cand.config_json, nullptr, false), c);
}

std::string run_kernel_path(const RunRecord& run) {
  const std::string path = run_meta_text(run, "kernel_path");
  if (!path.empty()) return path;
  const std::string flags = " " + run_meta_text(run, "cpu_flags") + " ";
  const auto has = [&](const char* f) { return flags.find(std::string(" ") + f + " ") != std::string::npos; };
  if (has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq")) return "avx512";
  if (has("avx2") && has("fma") && has("f16c")) return "avx2";
  return "scalar";
}

std::string sim_setup_difference(const RunRecord& a, const RunRecord& b) {
  const json ma = json::parse(a.meta_json, nullptr, false), mb = json::parse(b.meta_json, nullptr, false);
  const json none = json::object();
  const json& sa = ma.is_object() && ma.contains("sim") && ma["sim"].is_object() ? ma["sim"] : none;
  const json& sb = mb.is_object() && mb.contains("sim") && mb["sim"].is_object() ? mb["sim"] : none;
  if (sa.empty() != sb.empty()) return fmt::format("run {} is {}a sim run, run {} {}", a.id, sa.empty() ? "not " : "", b.id, sb.empty() ? "not" : "is");
  for (const char* key : {"kernel_path", "valgrind", "compiler", "libc", "engine_threads", "l2", "caches", "callgrind_options"}) {
    const json va = sa.value(key, json()), vb = sb.value(key, json());
    if (va == vb) continue;
    const auto text = [](const json& v) { return v.is_string() ? v.get<std::string>() : v.is_null() ? std::string("unrecorded") : v.dump(); };
    return fmt::format("sim {} {} vs {}", key, text(va), text(vb));
  }
  return "";
}

namespace {

// Why rows of a clock cannot be compared between the two runs ("" where they can).
struct Comparability {
  int definition_a = 0, definition_b = 0;
  std::string definition_why;  // exact and modelled rows wait for a new baseline
  std::string host_why;        // measured here: another CPU or kernel path
  std::string exact_why;       // another kernel path
  std::string sim_why;         // the sim clock counted another way (sim_setup_difference)
  std::string path_a;          // the baseline's kernel path and machine, for its history
  Machine machine_a;
  std::map<std::string, std::string> hashes_a, hashes_b;  // SoC profile hashes by SoC

  // Modelled figures need the same SoC profile: a recalibrated host prices everything anew.
  std::string model_why(const std::string& soc) const {
    if (!exact_why.empty()) return exact_why;
    const auto ia = hashes_a.find(soc), ib = hashes_b.find(soc);
    const std::string ha = ia == hashes_a.end() ? "" : ia->second, hb = ib == hashes_b.end() ? "" : ib->second;
    if (ha == hb) return "";
    return fmt::format("SoC profile '{}' {} vs {}", soc, ha.empty() ? "unrecorded" : ha, hb.empty() ? "unrecorded" : hb);
  }
};

std::map<std::string, std::string> profile_hashes(const RunRecord& run) {
  std::map<std::string, std::string> hashes;
  const json meta = json::parse(run.meta_json, nullptr, false);
  if (meta.is_object() && meta.contains("soc_profiles") && meta["soc_profiles"].is_object()) {
    for (const auto& [soc, used] : meta["soc_profiles"].items()) {
      if (used.is_object()) hashes[soc] = used.value("hash", "");
    }
  }
  return hashes;
}

Comparability comparability(RunComparison& out, const CompareOptions& options) {
  Comparability c;
  // Another benchmark definition moves exact and modelled figures by design: those rows wait
  // for a new baseline; host timings are still compared.
  c.definition_a = run_benchmark_definition(out.baseline);
  c.definition_b = run_benchmark_definition(out.candidate);
  if (c.definition_a != c.definition_b) {
    out.definition_change = std::pair{c.definition_a, c.definition_b};
    c.definition_why = fmt::format("benchmark definition changed v{} -> v{}", c.definition_a, c.definition_b);
    out.caveats.push_back(c.definition_why + ": set a new baseline");
  }
  // The machines: host timings need one CPU, every figure one kernel path.
  c.path_a = run_kernel_path(out.baseline);
  c.machine_a = run_machine(out.baseline);
  const std::string path_b = run_kernel_path(out.candidate);
  const Machine machine_b = run_machine(out.candidate);
  if (c.path_a != path_b) c.exact_why = c.host_why = fmt::format("kernel path {} vs {}", c.path_a, path_b);
  if (c.machine_a.cpu != machine_b.cpu) {
    c.host_why = fmt::format("CPU '{}' vs '{}'", c.machine_a.cpu, machine_b.cpu) + (c.host_why.empty() ? "" : ", " + c.host_why);
  } else if (!same_machine(c.machine_a, machine_b)) {
    c.host_why = fmt::format("board '{}' vs '{}'", c.machine_a.board, machine_b.board) + (c.host_why.empty() ? "" : ", " + c.host_why);
  }
  if (!c.host_why.empty() && options.allow_machine_change) {
    out.caveats.push_back("host timings are gated across a machine change (" + c.host_why +
                          "): a difference may be the machine's, not the change's");
    c.host_why.clear();
  }
  c.sim_why = sim_setup_difference(out.baseline, out.candidate);
  c.hashes_a = profile_hashes(out.baseline);
  c.hashes_b = profile_hashes(out.candidate);
  return c;
}

// Earlier runs of the suite on the baseline's machine (the baseline among them, never the
// candidate): how much runs scatter between themselves, beyond their repetitions.
struct Earlier {
  json config;
  std::vector<CaseSamples> cases;
};

std::vector<Earlier> earlier_runs(ResultsStore& store, const RunComparison& out, const Comparability& how, const CompareOptions& options) {
  std::vector<Earlier> earlier;
  // Runs of `kvbench ab` took their repetitions in turn, one process each: drift is already in
  // their spread.
  const auto interleaved = [](const RunRecord& r) {
    const json meta = json::parse(r.meta_json, nullptr, false);
    return meta.is_object() && meta.contains("ab");
  };
  if (!options.between_runs || (interleaved(out.baseline) && interleaved(out.candidate))) return earlier;
  const std::int64_t baseline = out.baseline.id, candidate = out.candidate.id;
  RunFilter filter;
  filter.status = "complete";
  filter.suite = out.baseline.suite;
  std::vector<RunRecord> runs;
  for (RunRecord& r : list_runs(store, filter)) {
    if (r.id == candidate || (r.id > candidate && r.id != baseline)) continue;
    if (run_kernel_path(r) != how.path_a || !same_machine(run_machine(r), how.machine_a)) continue;
    try {
      if (run_benchmark_definition(r) != how.definition_a) continue;
    } catch (const kv::InputError&) {
      continue;  // history only: an unreadable version is no run of the baseline's definition
    }
    runs.push_back(std::move(r));
  }
  if (runs.size() > kEarlierRuns) runs.erase(runs.begin(), runs.end() - static_cast<std::ptrdiff_t>(kEarlierRuns));
  for (const RunRecord& r : runs) earlier.push_back({json::parse(r.config_json, nullptr, false), load_samples(store, r.id)});
  return earlier;
}

// What one case's rows are compared with.
struct CaseInputs {
  const CaseSamples& base;
  const CaseSamples& cand;
  std::vector<const CaseSamples*> history;  // the same case in earlier runs with the baseline's configuration of it
  CoreSpeed speed;
};

// One metric of a case: its samples (CPU times at one core speed where the probe says the cores
// differed), compared by its rule, and not gated where its clock is not comparable.
MetricComparison compare_metric(const std::string& name, const CaseInputs& in, const MetricRule& rule, const CompareOptions& options,
                                const Comparability& how, CaseComparison& c) {
  const auto pick = [&](const CaseSamples& s) {
    const auto found = s.samples.find(name);
    return found == s.samples.end() ? std::vector<Sample>{} : found->second;
  };
  const std::optional<MetricKey> key = parse_metric_key(name);
  // Measured here, wall or CPU time: comparable only on the same CPU and kernel path.
  const bool host = key && measured_here(key->clock);
  const bool modelled = key && key->clock == Clock::Model;
  const bool counted = key && key->clock == Clock::Sim;
  std::vector<std::vector<Sample>> runs;
  for (const CaseSamples* h : in.history) runs.push_back(pick(*h));
  const std::optional<double> between = rule.kind == GateClass::Statistical ? between_run_variance(runs) : std::nullopt;
  std::vector<Sample> base_samples = pick(in.base), cand_samples = pick(in.cand);
  bool rescaled = false;
  if (in.speed.rescale && key && key->clock == Clock::Cpu && name != kCoreProbe) {
    const MetricDef* def = find_metric(key->name);
    if (def != nullptr && def->unit == "ms") {
      auto b = at_core_speed(base_samples, in.speed.base, in.speed.reference), r = at_core_speed(cand_samples, in.speed.cand, in.speed.reference);
      if (b && r) {
        base_samples = std::move(*b);
        cand_samples = std::move(*r);
        rescaled = true;
      }
    }
  }
  MetricComparison row = options.paired ? compare_paired_samples(name, base_samples, cand_samples, rule)
                                        : compare_samples(name, base_samples, cand_samples, rule, between.value_or(0.0),
                                                          static_cast<int>(runs.size()));
  if (rescaled) row.core_slowdown = in.speed.slowdown;
  const std::string why = host ? how.host_why : modelled ? how.model_why(in.base.soc) : counted ? how.sim_why : how.exact_why;
  if (!host && !how.definition_why.empty() && row.verdict != Verdict::NotGated) {
    row.verdict = Verdict::NotGated;
    row.note = how.definition_why;
  } else if (!why.empty() && row.verdict != Verdict::NotGated) {
    row.verdict = Verdict::NotGated;
    row.note = "not comparable: " + why;
    c.not_comparable = why;
  }
  return row;
}

// A regression an acknowledgement covers stays listed, marked, and stops failing the gate.
void apply_acks(ResultsStore& store, RunComparison& out) {
  const std::int64_t baseline = out.baseline.id, candidate = out.candidate.id;
  const std::vector<AckRow> acks = list_acks(store);
  for (CaseComparison& c : out.cases) {
    for (MetricComparison& row : c.rows) {
      if (row.verdict != Verdict::Regressed) continue;
      for (const AckRow& ack : acks) {
        const bool covers = ack.run_id == candidate || (ack.run_id < candidate && ack.baseline_run == baseline);
        if (covers && ::fnmatch(ack.metric_glob.c_str(), row.metric.c_str(), 0) == 0 &&
            ::fnmatch(ack.case_glob.c_str(), c.name.c_str(), 0) == 0) {
          row.acknowledged = fmt::format("ack {}: {}", ack.id, ack.reason);
          break;
        }
      }
    }
  }
}

}  // namespace

RunComparison compare_runs(ResultsStore& store, std::int64_t baseline, std::int64_t candidate, const GateRules& rules,
                           const CompareOptions& options) {
  RunComparison out;
  out.fdr = rules.fdr;
  out.baseline = get_run(store, baseline, "--baseline");
  out.candidate = get_run(store, candidate, "--candidate");
  require_complete(out.baseline, "--baseline");
  require_complete(out.candidate, "--candidate");
  if (out.baseline.suite != out.candidate.suite) {
    throw kv::InputError("--candidate", std::to_string(candidate),
                         fmt::format("run {} is of suite '{}', the baseline run {} of suite '{}': only runs of one suite compare",
                                     candidate, out.candidate.suite, baseline, out.baseline.suite));
  }
  const Comparability how = comparability(out, options);
  const json base_config = json::parse(out.baseline.config_json, nullptr, false);
  const json cand_config = json::parse(out.candidate.config_json, nullptr, false);
  const std::vector<CaseSamples> a = load_samples(store, baseline), b = load_samples(store, candidate);
  const std::vector<Earlier> earlier = earlier_runs(store, out, how, options);
  std::map<std::string, const CaseSamples*> by_name;
  for (const CaseSamples& c : b) by_name[c.name] = &c;
  std::vector<MetricRule> row_rules;
  std::vector<std::pair<std::size_t, std::size_t>> where;  // (case, row) of every row, for decide()
  for (const CaseSamples& base : a) {
    const auto it = by_name.find(base.name);
    if (it == by_name.end()) {
      out.only_in_baseline.push_back(base.name);
      continue;
    }
    CaseInputs in{base, *it->second, {}, core_speed(base, *it->second, options.paired)};
    by_name.erase(it);
    CaseComparison c;
    c.name = base.name;
    c.config_changes = config_changes(base_config, cand_config, base);
    if (options.require_same_config && !c.config_changes.empty()) {
      throw kv::InputError("--require-same-config", c.name, "the configuration differs: " + c.config_changes.front() +
                                                                (c.config_changes.size() > 1 ? fmt::format(" (and {} more)", c.config_changes.size() - 1) : ""));
    }
    for (const Earlier& e : earlier) {
      if (!config_changes(base_config, e.config, base).empty()) continue;
      for (const CaseSamples& s : e.cases) {
        if (s.name == base.name) in.history.push_back(&s);
      }
    }
    std::map<std::string, bool> metrics;
    for (const auto& [name, samples] : in.base.samples) metrics[name] = true;
    for (const auto& [name, samples] : in.cand.samples) metrics[name] = true;
    for (const auto& [name, unused] : metrics) {
      const MetricRule rule = rules.rule_for(name);
      where.emplace_back(out.cases.size(), c.rows.size());
      c.rows.push_back(compare_metric(name, in, rule, options, how, c));
      row_rules.push_back(rule);
    }
    out.cases.push_back(std::move(c));
  }
  for (const auto& [name, unused] : by_name) out.only_in_candidate.push_back(name);
  // One Benjamini-Hochberg adjustment over the whole comparison's statistical rows.
  std::vector<MetricComparison> all;
  for (const auto& [ci, ri] : where) all.push_back(out.cases[ci].rows[ri]);
  decide(all, row_rules, rules.fdr);
  for (std::size_t i = 0; i < where.size(); ++i) out.cases[where[i].first].rows[where[i].second] = all[i];
  for (CaseComparison& c : out.cases) judge_by_cpu_rows(c.rows);
  apply_acks(store, out);
  return out;
}

}  // namespace kvbench
