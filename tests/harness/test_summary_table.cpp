// The run summary's layout: human units, the 120-column limit on the built-in suites' cases at
// their widest figures, the key of common name parts, and a legend line for every mark and
// outcome.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
#include <random>
#include <regex>
#include <sstream>

#include "builtin_suites.h"
#include "metric_table.h"
#include "runtime/error.h"
#include "suite_config.h"
#include "summary_table.h"
#include "test_support.h"

using namespace kvbench;

namespace {

// A value a metric can take, drawn over its whole plausible range (log-uniform where it spans
// magnitudes).
double plausible(const MetricDef& def, std::mt19937& rng) {
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  const auto log_uniform = [&](double lo, double hi) { return std::pow(10.0, lo + (hi - lo) * unit(rng)); };
  if (def.unit == "ms") return log_uniform(-3.0, 7.0);       // 1 us .. 2.8 h
  if (def.unit == "bytes") return log_uniform(0.0, 12.0);    // 1 B .. 1 TB
  if (def.unit == "tokens/s") return log_uniform(-1.0, 6.0);
  if (def.unit == "%") return log_uniform(-5.0, 3.0) * (unit(rng) < 0.5 ? -1.0 : 1.0);
  if (def.unit == "count") return std::floor(log_uniform(0.0, 5.0));
  if (def.name == "kv_compression_ratio" || def.name == "write_amplification") return log_uniform(0.0, 1.3);
  if (def.unit == "ratio") return unit(rng) < 0.2 ? log_uniform(-7.0, 0.0) : unit(rng);
  return log_uniform(-3.0, 3.0);
}

// A run of the suite's cases with random figures over their ranges, every mark that can be set.
RunView view_of(const SuiteConfig& suite, std::uint32_t seed) {
  std::mt19937 rng(seed);
  RunView run;
  run.id = 7;
  run.status = "complete";
  run.suite = suite.name;
  run.planned_repetitions = suite.repetitions;
  run.noise_threshold = suite.noise_threshold;
  run.synthetic = true;
  for (const auto& m : suite.models) {
    for (const auto& w : suite.workloads) {
      for (const auto& p : suite.policies) {
        for (const auto& soc : suite.socs) {
          CaseView c;
          c.name = m.name + "/" + w.name + "/" + p.name + "/" + soc;
          c.model = m.name;
          c.workload = w.name;
          c.policy = p.name;
          c.soc = soc;
          c.status = "complete";
          c.repetitions = suite.repetitions;
          for (const MetricDef& def : metric_table()) {
            c.figures[def.name] = CaseFigure{plausible(def, rng), "", def.extrapolable, def.clock == Clock::Host};
          }
          run.cases.push_back(std::move(c));
        }
      }
    }
  }
  run.cases.front().degradation = {"L2 write failed at step 3: ENOSPC"};
  run.cases.front().degraded_repetitions = 1;
  run.cases.back().status = "failed";
  run.cases.back().note = "interrupted";
  run.cases.back().repetitions = 1;
  return run;
}

}  // namespace

TEST_CASE("the summary of every built-in suite fits 120 columns with no exponent notation", "[summary]") {
  const std::regex exponent("[0-9]e[-+][0-9]");
  for (const auto& [name, text] : builtin_suites()) {
    const SuiteConfig suite = parse_suite(text, "builtin:" + name, ".");
    for (std::uint32_t seed = 1; seed <= 20; ++seed) {
      const std::string summary = render_summary(view_of(suite, seed), default_summary_columns());
      std::istringstream lines(summary);
      for (std::string line; std::getline(lines, line);) {
        INFO(name << " seed " << seed << ":\n" << summary);
        CHECK(line.size() <= 120);
        CHECK_FALSE(std::regex_search(line, exponent));
      }
    }
  }
}

TEST_CASE("case names keep the parts that differ, the common ones go in a key", "[summary]") {
  const SuiteConfig nightly = parse_suite(builtin_suites().at(1).second, "builtin", ".");
  REQUIRE(builtin_suites().at(1).first == "nightly");
  const RunView run = view_of(nightly, 3);
  const std::string summary = render_summary(run, default_summary_columns());
  CHECK(summary.find("every case: model syn-7b, soc host") != std::string::npos);
  CHECK(summary.find("\nrag-16k/f16-full !") != std::string::npos);
  CHECK(summary.find("syn-7b/rag-16k") == std::string::npos);
  // Every mark and outcome in plain words.
  CHECK(summary.find("* extrapolated: scaled from the sampled layers") != std::string::npos);
  CHECK(summary.find("~ noisy: in some repetition the engine's threads waited for a core more than 10% of its wall time") !=
        std::string::npos);
  CHECK(summary.find("! degraded:") != std::string::npos);
  CHECK(summary.find("degraded rag-16k/f16-full (in 1 of 5 repetitions):\n  L2 write failed at step 3: ENOSPC") != std::string::npos);
  CHECK(summary.find("interrupted multimodal-2i/q4-hybrid-tight-l1: the run was stopped during this case; 1 of 5 repetitions were "
                     "stored") != std::string::npos);
  CHECK(summary.find("[interrupted]") != std::string::npos);
  CHECK(summary.find("clock host (measured here): ttft first, ttft next p50, prefill tok/s, tpot p50, tpot p99, decode tok/s, noise "
                     "share") != std::string::npos);
}

TEST_CASE("cells: units by the metric table, marks, and a dash for what does not apply", "[summary]") {
  const auto& columns = default_summary_columns();
  const auto column = [&](const std::string& metric) {
    for (const SummaryColumn& c : columns) {
      if (c.metric == metric) return c;
    }
    FAIL(metric);
    return columns.front();
  };
  CHECK(summary_cell(column("ttft_first_request_ms"), {856000.0, "", true, false}) == "14.3 min*");
  CHECK(summary_cell(column("peak_l1_bytes"), {805306368.0, "", false, false}) == "768 MiB");
  CHECK(summary_cell(column("token_drop_ratio"), {0.7469, "", false, false}) == "74.7%");
  CHECK(summary_cell(column("kv_compression_ratio"), {3.2381, "", false, false}) == "3.24x");
  CHECK(summary_cell(column("noise_run_queue_share"), {0.125, "", false, true}) == "12.5%~");
  CHECK(summary_cell(column("ppl_delta_pct"), {std::nullopt, "synthetic backend", false, false}) == "-");
  CHECK(summary_cell(column("attn_rel_error"), {0.0990123, "", false, false}) == "0.0990");
}

TEST_CASE("show --metrics picks columns by name and refuses unknown ones, the JSON holds the same medians", "[summary]") {
  const auto columns = summary_columns("ttft_first_request_ms,swap_out_gb_per_s");
  REQUIRE(columns.size() == 2);
  CHECK(columns[0].head == "ttft");
  CHECK(columns[0].sub == "first");
  CHECK(columns[1].head == "swap_out_gb_per_s");
  CHECK(summary_columns("all").size() == metric_table().size());
  CHECK_THROWS_MATCHES(summary_columns("ttft_ms,tpot"), kv::InputError, Catch::Predicate<kv::InputError>([](const kv::InputError& e) {
                         return e.where() == "--metrics" && e.field() == "tpot";
                       }));
  const RunView run = view_of(parse_suite(builtin_suites().at(0).second, "builtin", "."), 5);
  const auto doc = nlohmann::json::parse(summary_json(run, columns));
  REQUIRE(doc["cases"].size() == run.cases.size());
  CHECK(doc["cases"][0]["metrics"]["ttft_first_request_ms"]["median"].get<double>() == *run.cases[0].figures.at("ttft_first_request_ms").median);
  CHECK(doc["cases"][0]["metrics"]["ttft_first_request_ms"]["clock"] == "host");
  CHECK(doc["cases"][0]["metrics"].size() == 2);
  CHECK(doc["run"]["id"] == 7);
}

TEST_CASE("a sim run's summary shows its counted figures in place of the host timings, within 120 columns", "[summary][sim]") {
  const std::regex exponent("[0-9]e[-+][0-9]");
  for (const auto& [name, text] : builtin_suites()) {
    const SuiteConfig suite = parse_suite(text, "builtin:" + name, ".");
    RunView run = view_of(suite, 5);
    run.sim = true;
    const auto& columns = run_summary_columns(run);
    CHECK(&columns == &sim_summary_columns());
    const std::string summary = render_summary(run, columns);
    INFO(name << ":\n" << summary);
    CHECK(summary.find("clock sim (the engine's work counted under callgrind") != std::string::npos);
    CHECK(summary.find("decode instr, decode L1 miss, decode LL miss, decode cycles") != std::string::npos);
    CHECK(summary.find("clock host") == std::string::npos);
    CHECK(summary.find("a sim run: each engine run counted under callgrind") != std::string::npos);
    std::istringstream lines(summary);
    for (std::string line; std::getline(lines, line);) {
      CHECK(line.size() <= 120);
      CHECK_FALSE(std::regex_search(line, exponent));
    }
  }
  // Its model view is the model view; a named column keeps the sim headers.
  RunView model = view_of(parse_suite(builtin_suites().front().second, "builtin", "."), 5);
  model.sim = true;
  model.timing = Clock::Model;
  CHECK(&run_summary_columns(model) == &default_summary_columns());
  CHECK(summary_columns("span_decode_total_sim_cycles").front().sub == "cycles");
}

TEST_CASE("a sweep's SoC cases with no measured figure show their modelled timings, marked, and the legend names each column's clock", "[summary][sweep]") {
  SuiteConfig suite = parse_suite(builtin_suites().front().second, "builtin", ".");
  suite.socs = {"host", "apple-m3"};
  RunView run = view_of(suite, 4);
  // As load_run_view_measured_or_modelled leaves a sweep: the SoC's cases on the model clock.
  for (CaseView& c : run.cases) {
    if (c.soc == "apple-m3") c.timing = Clock::Model;
  }
  REQUIRE(mixed_timings(run));
  for (const std::string& line : kvtest::lines_of(render_summary(run, default_summary_columns()))) CHECK(line.size() <= 120);
  const std::string summary = render_summary(run, default_summary_columns(), 400);  // legend lines unwrapped
  INFO(summary);
  CHECK(summary.find("/apple-m3 ^") != std::string::npos);
  CHECK(summary.find("/host ^") == std::string::npos);
  CHECK(summary.find("^ modelled: a SoC's case priced from the host run, not run on that SoC; its timings are the cost model's") !=
        std::string::npos);
  CHECK(summary.find("clock host (measured here) on the other rows, model (priced by the row's SoC profile) on the rows marked ^: "
                     "ttft first, ttft next p50, prefill tok/s, tpot p50, tpot p99, decode tok/s") != std::string::npos);
  CHECK(summary.find("clock host (measured here): noise share") != std::string::npos);
  CHECK(summary.find("model clock: each case's operation counts priced by its SoC profile") != std::string::npos);
  const auto doc = nlohmann::json::parse(summary_json(run, default_summary_columns()));
  for (const auto& c : doc["cases"]) {
    const bool soc = c["name"].get<std::string>().find("/apple-m3") != std::string::npos;
    INFO(c["name"]);
    CHECK(c["timings"] == (soc ? "model" : "host"));
    CHECK(c["metrics"]["tpot_ms_p50"]["clock"] == (soc ? "model" : "host"));
    CHECK(c["metrics"]["kv_bytes_per_token"]["clock"] == "exact");
  }
  // A view of measured cases alone is as before: no mark, one clock per column.
  for (CaseView& c : run.cases) c.timing = Clock::Host;
  CHECK_FALSE(mixed_timings(run));
  const std::string plain = render_summary(run, default_summary_columns(), 400);
  CHECK(plain.find(" ^") == std::string::npos);
  CHECK(plain.find("clock host (measured here): ttft first") != std::string::npos);
}
