// compare_runs across benchmark definitions: runs of different versions leave their exact and
// modelled rows not gated with one caveat asking for a new baseline, host rows still compared;
// runs of one version compare as before; a stored version that is not a positive integer is bad
// input. And across core speeds: a case with noisy repetitions has its CPU-time rows judged at
// the baseline's core-speed probe, so slower cores alone are no regression and a slower
// engine still is.
#include <catch2/catch.hpp>

#include <algorithm>

#include "results_store.h"
#include "run_comparison.h"
#include "runtime/error.h"
#include "test_support.h"

using namespace kvbench;

namespace {

const char* const kDefinitionCaveat = "benchmark definition changed v1 -> v2: set a new baseline";

// A complete run of suite "s": one case, 3 repetitions of an exact, a modelled and a host
// figure; `scale` multiplies the exact and modelled ones.
std::int64_t add_run(ResultsStore& store, const std::string& config_json, double scale) {
  RunInfo info;
  info.git_sha = "abc123";
  info.config_json = config_json;
  info.config_hash = "h";
  info.tags = {"t"};
  info.meta_json = R"({"suite": "s", "cpu_model": "cpu", "kernel_path": "scalar"})";
  const std::int64_t run = store.begin_run(info);
  const std::int64_t c = store.add_case(run, {"m", "w", "p", "host", ""});
  for (int rep = 1; rep <= 3; ++rep) {
    store.add_metrics(c, {{rep, "kv_bytes_per_token", 1000.0 * scale, "", "bytes", Clock::Exact, false, false},
                          {rep, "ttft_ms", 50.0 * scale, "", "ms", Clock::Model, false, false},
                          {rep, "ttft_ms", 80.0 + rep, "", "ms", Clock::Host, false, false}});
  }
  store.finish_case(c, CaseStatus::Complete);
  store.finish_run(run, RunStatus::Complete);
  return run;
}

// A complete run of suite "s", one case: per repetition a decode CPU time of cpu_ms x a small
// fixed jitter and the core-speed probe probe_ms x another, the probe marked noisy when `busy`.
std::int64_t add_cpu_run(ResultsStore& store, double cpu_ms, double probe_ms, bool busy) {
  RunInfo info;
  info.git_sha = "abc123";
  info.config_json = R"({"seed": 1})";
  info.config_hash = "h";
  info.meta_json = R"({"suite": "s", "cpu_model": "cpu", "kernel_path": "scalar"})";
  const std::int64_t run = store.begin_run(info);
  const std::int64_t c = store.add_case(run, {"m", "w", "p", "host", ""});
  const double jitter[] = {1.0, 1.012, 0.991, 1.006, 0.996};
  const double probe_jitter[] = {1.004, 0.997, 1.001, 0.995, 1.003};
  for (int rep = 1; rep <= 5; ++rep) {
    store.add_metrics(c, {{rep, "span_decode_total_cpu_ms", cpu_ms * jitter[rep - 1], "", "ms", Clock::Cpu, false, false},
                          {rep, "noise_cpu_probe_ms", probe_ms * probe_jitter[rep - 1], "", "ms", Clock::Cpu, false, busy}});
  }
  store.finish_case(c, CaseStatus::Complete);
  store.finish_run(run, RunStatus::Complete);
  return run;
}

const MetricComparison& row(const RunComparison& c, const std::string& metric) {
  REQUIRE(c.cases.size() == 1);
  const auto& rows = c.cases[0].rows;
  const auto it = std::find_if(rows.begin(), rows.end(), [&](const MetricComparison& m) { return m.metric == metric; });
  REQUIRE(it != rows.end());
  return *it;
}

}  // namespace

TEST_CASE("runs of different benchmark definitions gate host rows only, with one caveat", "[definition]") {
  kvtest::TempDir dir("run-comparison-definition");
  ResultsStore store(dir.path + "/results.sqlite");
  const GateRules rules = parse_gate_rules(R"({"rules": []})", "empty.json");
  // Version 1: stored before the field existed.
  const std::int64_t old_run = add_run(store, R"({"seed": 1})", 1.0);
  const std::int64_t new_run = add_run(store, R"({"seed": 1, "benchmark_definition": 2})", 1.1);
  const RunComparison c = compare_runs(store, old_run, new_run, rules, {});
  REQUIRE(c.definition_change);
  CHECK(*c.definition_change == std::pair{1, 2});
  CHECK(std::count(c.caveats.begin(), c.caveats.end(), kDefinitionCaveat) == 1);
  for (const char* metric : {"kv_bytes_per_token", "ttft_ms@model"}) {
    INFO(metric);
    CHECK(row(c, metric).verdict == Verdict::NotGated);
    CHECK(row(c, metric).note == "benchmark definition changed v1 -> v2");
  }
  CHECK(row(c, "ttft_ms").verdict != Verdict::NotGated);
  CHECK(row(c, "ttft_ms").note.find("benchmark definition") == std::string::npos);
  CHECK(c.failing() == 0);
  // The version is the run's, not a case's configuration change.
  CHECK(c.cases[0].config_changes.empty());
  CHECK(c.cases[0].not_comparable.empty());
}

TEST_CASE("a configuration block one run lacks is one config change, however many fields it holds", "[definition]") {
  kvtest::TempDir dir("run-comparison-block");
  ResultsStore store(dir.path + "/results.sqlite");
  const GateRules rules = parse_gate_rules(R"({"rules": []})", "empty.json");
  const std::int64_t before = add_run(store, R"({"seed": 1, "benchmark_definition": 3, "models": [{"name": "m", "preset": "p"}]})", 1.0);
  const std::int64_t after = add_run(store, R"({"seed": 1, "benchmark_definition": 4, "models": [{"name": "m", "preset": "p",
      "synthetic": {"statistics": "published", "sinks": 4, "window": 256, "streaming_share": 0.65}}]})", 1.0);
  const RunComparison c = compare_runs(store, before, after, rules, {});
  REQUIRE(c.cases.size() == 1);
  CHECK(c.cases[0].config_changes == std::vector<std::string>{"models.synthetic: (absent) -> {4 fields}"});
  // Inside a block both have, each changed field is named.
  const std::int64_t uniform = add_run(store, R"({"seed": 1, "benchmark_definition": 4, "models": [{"name": "m", "preset": "p",
      "synthetic": {"statistics": "uniform-heads", "sinks": 4, "window": 256, "streaming_share": 0.65}}]})", 1.0);
  CHECK(compare_runs(store, after, uniform, rules, {}).cases[0].config_changes ==
        std::vector<std::string>{R"(models.synthetic.statistics: "published" -> "uniform-heads")"});
}

TEST_CASE("runs of one benchmark definition compare their exact rows as before", "[definition]") {
  kvtest::TempDir dir("run-comparison-same-definition");
  ResultsStore store(dir.path + "/results.sqlite");
  const GateRules rules = parse_gate_rules(R"({"rules": []})", "empty.json");
  const std::string config = R"({"seed": 1, "benchmark_definition": 2})";
  const std::int64_t base = add_run(store, config, 1.0);
  const std::int64_t same = add_run(store, config, 1.0);
  const std::int64_t more = add_run(store, config, 1.1);
  RunComparison c = compare_runs(store, base, same, rules, {});
  CHECK_FALSE(c.definition_change);
  CHECK(c.caveats.empty());
  CHECK(row(c, "kv_bytes_per_token").verdict == Verdict::Unchanged);
  c = compare_runs(store, base, more, rules, {});
  CHECK_FALSE(c.definition_change);
  CHECK(row(c, "kv_bytes_per_token").verdict == Verdict::Regressed);
  CHECK(row(c, "ttft_ms@model").verdict == Verdict::Regressed);
  CHECK(c.failing() == 2);
  // An explicit version 1 is the same as none.
  const std::int64_t v1 = add_run(store, R"({"seed": 1, "benchmark_definition": 1})", 1.0);
  const std::int64_t none = add_run(store, R"({"seed": 1})", 1.0);
  CHECK_FALSE(compare_runs(store, v1, none, rules, {}).definition_change);
}

TEST_CASE("a stored benchmark definition that is not a positive integer is bad input", "[definition]") {
  kvtest::TempDir dir("run-comparison-bad-definition");
  ResultsStore store(dir.path + "/results.sqlite");
  const GateRules rules = parse_gate_rules(R"({"rules": []})", "empty.json");
  const std::int64_t good = add_run(store, R"({"benchmark_definition": 2})", 1.0);
  for (const char* bad : {R"({"benchmark_definition": "two"})", R"({"benchmark_definition": 0})", R"({"benchmark_definition": 2.5})"}) {
    INFO(bad);
    const std::int64_t run = add_run(store, bad, 1.0);
    CHECK_THROWS_MATCHES(compare_runs(store, good, run, rules, {}), kv::InputError,
                         Catch::Predicate<kv::InputError>([&](const kv::InputError& e) {
                           return e.where() == "run " + std::to_string(run) && e.field() == "config_json/benchmark_definition";
                         }));
  }
}

TEST_CASE("a busy candidate's CPU times are judged at the baseline's core speed", "[core-speed]") {
  kvtest::TempDir dir("run-comparison-core-speed");
  ResultsStore store(dir.path + "/results.sqlite");
  const GateRules rules = parse_gate_rules(R"({"rules": []})", "empty.json");
  const std::int64_t quiet = add_cpu_run(store, 60.0, 5.0, false);
  // The decode CPU-time row of one comparison (a copy: the comparison does not outlive the call).
  const auto cpu_row = [&](std::int64_t baseline, std::int64_t candidate, const CompareOptions& options = {}) {
    return row(compare_runs(store, baseline, candidate, rules, options), "span_decode_total_cpu_ms");
  };

  SECTION("cores 18% slower and the engine unchanged: unchanged, with the probe's slowdown") {
    const std::int64_t busy = add_cpu_run(store, 60.0 * 1.18, 5.0 * 1.18, true);
    const MetricComparison m = cpu_row(quiet, busy);
    CHECK(m.verdict == Verdict::Unchanged);
    REQUIRE(m.core_slowdown);
    CHECK(*m.core_slowdown == Approx(1.18).epsilon(0.01));
    REQUIRE(m.candidate_median);
    CHECK(*m.candidate_median == Approx(60.0).epsilon(0.02));
  }
  SECTION("cores 18% slower and the engine 40% slower: regressed by about 40%") {
    const std::int64_t busy = add_cpu_run(store, 60.0 * 1.18 * 1.40, 5.0 * 1.18, true);
    const MetricComparison m = cpu_row(quiet, busy);
    CHECK(m.verdict == Verdict::Regressed);
    CHECK(m.ratio == Approx(1.40).epsilon(0.02));
  }
  SECTION("cores 18% slower and the engine 20% slower: past the band, within what the correction may miss") {
    // Called only beyond 5% + 18% (the correction applied): inconclusive, saying why.
    const std::int64_t busy = add_cpu_run(store, 60.0 * 1.18 * 1.20, 5.0 * 1.18, true);
    const MetricComparison m = cpu_row(quiet, busy);
    CHECK(m.ratio == Approx(1.20).epsilon(0.02));
    CHECK(m.verdict == Verdict::Inconclusive);
    CHECK(m.note.find("+20.0% is past the 5% band but within 23.9%") != std::string::npos);
  }
  SECTION("a busy candidate whose probe ran faster and engine slower by a little: never regressed") {
    // The shape a shared runner produced with no change to the engine: the engine's CPU time
    // +3.9% as measured, the probe -5.8%, so +10.3% at the baseline's core speed.
    const std::int64_t busy = add_cpu_run(store, 60.0 * 1.039, 5.0 * 0.942, true);
    const MetricComparison m = cpu_row(quiet, busy);
    CHECK(m.ratio == Approx(1.103).epsilon(0.01));
    CHECK(m.verdict == Verdict::Inconclusive);
    CHECK(m.note.find("within 15.5%") != std::string::npos);
  }
  SECTION("the same cores and the engine 25% slower: regressed past the 10% allowance") {
    const std::int64_t busy = add_cpu_run(store, 60.0 * 1.25, 5.0, true);
    const MetricComparison m = cpu_row(quiet, busy);
    CHECK(m.verdict == Verdict::Regressed);
  }
  SECTION("the baseline busy and the candidate quiet: the same rule, either way") {
    const std::int64_t busy = add_cpu_run(store, 60.0 * 1.18, 5.0 * 1.18, true);
    const MetricComparison m = cpu_row(busy, quiet);
    CHECK(m.verdict == Verdict::Unchanged);
    REQUIRE(m.core_slowdown);
    CHECK(*m.core_slowdown == Approx(1.0 / 1.18).epsilon(0.01));
  }
  SECTION("both busy throughout: CPU times are judged as measured, the probe aside") {
    const std::int64_t busy = add_cpu_run(store, 60.0 * 1.18, 5.0 * 1.18, true);
    const std::int64_t slower = add_cpu_run(store, 60.0 * 1.18 * 1.25, 5.0 * 1.18, true);
    const MetricComparison m = cpu_row(busy, slower);
    CHECK(m.verdict == Verdict::Regressed);
    CHECK_FALSE(m.core_slowdown);
  }
  SECTION("paired: only pairs of one noisy and one quiet repetition are rescaled") {
    const std::int64_t busy = add_cpu_run(store, 60.0 * 1.18, 5.0 * 1.18, true);
    CompareOptions paired;
    paired.paired = true;
    const MetricComparison m = cpu_row(quiet, busy, paired);
    CHECK(m.verdict == Verdict::Unchanged);
    REQUIRE(m.core_slowdown);
  }
  SECTION("both quiet: CPU times are judged as measured, the probe aside") {
    const std::int64_t other = add_cpu_run(store, 60.0 * 1.18, 5.0 * 1.18, false);
    const MetricComparison m = cpu_row(quiet, other);
    CHECK(m.verdict == Verdict::Regressed);
    CHECK_FALSE(m.core_slowdown);
  }
}

namespace {

// A complete sim run of suite "s", one case: decode instructions `count` in 2 repetitions, its
// counting described by `sim` (meta_json "sim").
std::int64_t add_sim_run(ResultsStore& store, double count, const std::string& sim) {
  RunInfo info;
  info.git_sha = "abc123";
  info.config_json = R"({"seed": 1, "sim": true})";
  info.config_hash = "h";
  info.meta_json = R"({"suite": "s", "cpu_model": "cpu", "kernel_path": "avx512", "sim": )" + sim + "}";
  const std::int64_t run = store.begin_run(info);
  const std::int64_t c = store.add_case(run, {"m", "w", "p", "host", ""});
  for (int rep = 1; rep <= 2; ++rep) {
    store.add_metrics(c, {{rep, "span_decode_total_sim_instructions", count, "", "count", Clock::Sim, false, false}});
  }
  store.finish_case(c, CaseStatus::Complete);
  store.finish_run(run, RunStatus::Complete);
  return run;
}

const char* const kSimSetup =
    R"({"tool": "callgrind", "valgrind": "valgrind-3.19.0", "kernel_path": "avx2", "compiler": "GNU 12.2.0", "libc": "2.36",
        "engine_threads": 1, "l2": "synchronous", "caches": {"I1": "32 KiB 8-way, 64-byte lines"}, "callgrind_options": ["--tool=callgrind"]})";

}  // namespace

TEST_CASE("sim rows compare exactly where the runs counted alike, and are not gated where they did not", "[sim][definition]") {
  kvtest::TempDir dir("run-comparison-sim");
  ResultsStore store(dir.path + "/results.sqlite");
  const GateRules rules = parse_gate_rules(R"({"rules": []})", "empty.json");
  const std::int64_t base = add_sim_run(store, 1000000.0, kSimSetup);
  // The same count passes, one more instruction in a million regresses: counts are exact.
  CHECK(row(compare_runs(store, base, add_sim_run(store, 1000000.0, kSimSetup), rules, {}), "span_decode_total_sim_instructions").verdict ==
        Verdict::Unchanged);
  CHECK(row(compare_runs(store, base, add_sim_run(store, 1000100.0, kSimSetup), rules, {}), "span_decode_total_sim_instructions").verdict ==
        Verdict::Regressed);
  // Another valgrind, or the kernels on another path under it: not comparable, whatever the counts.
  std::string other_valgrind = kSimSetup;
  other_valgrind.replace(other_valgrind.find("3.19.0"), 6, "3.20.0");
  const MetricComparison tool = row(compare_runs(store, base, add_sim_run(store, 2000000.0, other_valgrind), rules, {}),
                                    "span_decode_total_sim_instructions");
  CHECK(tool.verdict == Verdict::NotGated);
  CHECK(tool.note == "not comparable: sim valgrind valgrind-3.19.0 vs valgrind-3.20.0");
  std::string scalar = kSimSetup;
  scalar.replace(scalar.find("\"avx2\""), 6, "\"scalar\"");
  CHECK(row(compare_runs(store, base, add_sim_run(store, 2000000.0, scalar), rules, {}), "span_decode_total_sim_instructions").note ==
        "not comparable: sim kernel_path avx2 vs scalar");
}
