// SoC sweeps through the runner: one engine run per configuration priced by every listed SoC
// (model figures per SoC, deterministic across runs; host figures only on the host's case), a
// SoC whose budget cannot hold the host run's L1 peak getting its own engine run with its
// capacities (capacity_rerun), and weights above a budget priced with fits_in_memory 0.
#include <catch2/catch.hpp>

#include <sqlite3.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>

#include "results_store.h"
#include "case_pricing.h"
#include "run_view.h"
#include "runner.h"
#include "soc_profiles.h"
#include "suite_config.h"
#include "test_support.h"

using namespace kvbench;

namespace {

std::string sweep_suite(const std::string& socs, const std::string& memory = "") {
  return R"({"name": "sweep-test", "seed": 3, "repetitions": 2, "warmup": 0,
    "models": [{"name": "syn-05b", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag-2k", "kind": "rag", "context_tokens": 2048, "gen_tokens": 8}],
    "policies": [{"name": "q4-hybrid", "k": "q4", "v": "q4", "residual_tokens": 64,
      "sparse": {"selector": "hybrid", "sinks": 4, "window": 256, "budget": 0.25, "sample_every": 8})" +
         (memory.empty() ? "" : ", \"memory\": " + memory) + R"(}],
    "socs": )" + socs + "}";
}

// (case soc, repetition, name, clock) -> value (NaN for NULL) of run `run`.
using Key = std::tuple<std::string, int, std::string, std::string>;
std::map<Key, double> figures(const std::string& db, int run) {
  ResultsStore store(db);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(store.db(), "SELECT soc, repetition, name, clock, value FROM metric_values WHERE run_id = ?", -1, &stmt,
                             nullptr) == SQLITE_OK);
  sqlite3_bind_int(stmt, 1, run);
  std::map<Key, double> out;
  while (sqlite3_step(stmt) == SQLITE_ROW) {
    const auto text = [&](int c) { return std::string(reinterpret_cast<const char*>(sqlite3_column_text(stmt, c))); };
    out[{text(0), sqlite3_column_int(stmt, 1), text(2), text(3)}] =
        sqlite3_column_type(stmt, 4) == SQLITE_NULL ? std::nan("") : sqlite3_column_double(stmt, 4);
  }
  sqlite3_finalize(stmt);
  return out;
}

std::size_t count(const std::map<Key, double>& f, const std::string& soc, const std::string& clock) {
  std::size_t n = 0;
  for (const auto& [key, value] : f) n += std::get<0>(key) == soc && std::get<3>(key) == clock ? 1 : 0;
  return n;
}

double value(const std::map<Key, double>& f, const std::string& soc, const std::string& name, const std::string& clock, int rep = 1) {
  const auto it = f.find({soc, rep, name, clock});
  REQUIRE(it != f.end());
  return it->second;
}

RunOptions quiet(const kvtest::TempDir& dir) {
  RunOptions options;
  options.db_path = dir.path + "/results.sqlite";
  options.progress = false;
  return options;
}

// The built-in host profile renamed, with a smaller budget for one model.
kv::soc::SocProfile small_soc(const std::string& name, double budget_bytes) {
  kv::soc::SocProfile p = load_soc_profile("host", "");
  p.name = name;
  p.model_budget_bytes.value = budget_bytes;
  p.runtime_reserve_bytes.value = 64.0 * (1 << 20);
  p.hash = name;
  return p;
}

}  // namespace

TEST_CASE("a sweep prices one engine run per configuration on every SoC, the same in every run", "[sweep]") {
  const kvtest::TempDir dir("kvbench-sweep");
  const SuiteConfig suite = parse_suite(sweep_suite(R"(["host", "snapdragon-8-gen-3", "apple-m3"])"), "sweep.json", dir.path);
  const RunOptions options = quiet(dir);
  REQUIRE(run_suite(suite, options).status == RunStatus::Complete);
  REQUIRE(run_suite(suite, options).status == RunStatus::Complete);
  const auto first = figures(options.db_path, 1), second = figures(options.db_path, 2);
  for (const std::string soc : {"host", "snapdragon-8-gen-3", "apple-m3"}) {
    INFO(soc);
    CHECK(count(first, soc, "model") > 20);  // a full set of modelled figures per repetition
    CHECK(count(first, soc, "exact") > 10);
    CHECK(value(first, soc, "capacity_rerun", "exact") == 0.0);
    for (const auto& [key, v] : first) {
      if (std::get<0>(key) != soc || std::get<3>(key) != "model") continue;
      INFO(std::get<2>(key));
      const double again = second.at(key);
      CHECK(((std::isnan(v) && std::isnan(again)) || v == again));
    }
  }
  // Host-clock figures only on the host's case; the exact ones the same everywhere.
  CHECK(count(first, "host", "host") > 10);
  CHECK(count(first, "snapdragon-8-gen-3", "host") == 0);
  CHECK(count(first, "apple-m3", "host") == 0);
  CHECK(value(first, "apple-m3", "kv_bytes_per_token", "exact") == value(first, "host", "kv_bytes_per_token", "exact"));
  // Each SoC prices the same counts differently.
  CHECK(value(first, "apple-m3", "tpot_ms_p50", "model") != value(first, "snapdragon-8-gen-3", "tpot_ms_p50", "model"));
  CHECK(value(first, "host", "tpot_ms_p50", "model") != value(first, "apple-m3", "tpot_ms_p50", "model"));
  {
    // What show prints unless told a clock: the host's case measured, the SoCs' (never run
    // there) modelled, not dashes.
    ResultsStore store(options.db_path, Access::ReadOnly);
    const RunView view = load_run_view_measured_or_modelled(store, 1);
    CHECK(view.timing == Clock::Host);
    REQUIRE(view.cases.size() == 3);
    CHECK(mixed_timings(view));
    for (const CaseView& c : view.cases) {
      INFO(c.name);
      const bool host = c.soc == "host";
      CHECK(c.timing == (host ? Clock::Host : Clock::Model));
      REQUIRE(c.figures.count("tpot_ms_p50") == 1);
      REQUIRE(c.figures.at("tpot_ms_p50").median);
      if (!host) CHECK(*c.figures.at("tpot_ms_p50").median == value(first, c.soc, "tpot_ms_p50", "model"));
      CHECK(c.figures.count("noise_run_queue_share") == (host ? 1u : 0u));
      CHECK(*c.figures.at("kv_bytes_per_token").median == value(first, c.soc, "kv_bytes_per_token", "exact"));
    }
    const RunView host = load_run_view(store, 1, Clock::Host);  // --clock host: as measured, nothing else
    CHECK(host.cases[1].figures.count("tpot_ms_p50") == 0);
  }
  // A sweep of SoCs alone has no measured case: the whole view is the model view.
  SuiteConfig socs_only = suite;
  socs_only.socs = {"apple-m3"};
  REQUIRE(run_suite(socs_only, options).status == RunStatus::Complete);
  ResultsStore store(options.db_path, Access::ReadOnly);
  const RunView view = load_run_view_measured_or_modelled(store, 3);
  CHECK(view.timing == Clock::Model);
  CHECK_FALSE(mixed_timings(view));
  REQUIRE(view.cases.size() == 1);
  CHECK(*view.cases[0].figures.at("tpot_ms_p50").median == value(first, "apple-m3", "tpot_ms_p50", "model"));
}

TEST_CASE("a SoC whose budget is below the host run's L1 peak gets its own engine run with its capacities", "[sweep]") {
  const kvtest::TempDir dir("kvbench-sweep-rerun");
  const SuiteConfig suite = parse_suite(sweep_suite(R"(["host"])"), "sweep.json", dir.path);
  SuiteConfig swept = suite;
  swept.socs = {"host", "tight-phone"};
  RunOptions options = quiet(dir);
  // First, the host run alone: its whole-model KV peak.
  REQUIRE(run_suite(suite, options).status == RunStatus::Complete);
  const double peak = value(figures(options.db_path, 1), "host", "peak_l1_bytes", "exact");
  const kv::soc::ModelWork weights = model_work(kv::find_synthetic_preset("qwen-0.5b-gqa", "test"));
  // A budget that holds the weights, the reserve and 60% of that peak.
  options.profiles.emplace("tight-phone", small_soc("tight-phone", static_cast<double>(weights.resident_bytes) + 64.0 * (1 << 20) + 0.6 * peak));
  REQUIRE(run_suite(swept, options).status == RunStatus::Complete);
  const auto f = figures(options.db_path, 2);
  CHECK(value(f, "host", "capacity_rerun", "exact") == 0.0);
  CHECK(value(f, "tight-phone", "capacity_rerun", "exact") == 1.0);
  // Its own run held at most its KV budget, and so swapped to L2 where the host's did not.
  CHECK(value(f, "tight-phone", "peak_l1_bytes", "exact") <= 0.6 * peak + 1.0);
  CHECK(value(f, "tight-phone", "swap_out_bytes", "exact") > 0.0);
  CHECK_FALSE(value(f, "host", "swap_out_bytes", "exact") > 0.0);  // NULL: no L1 cap, no L2
  CHECK(value(f, "tight-phone", "fits_in_memory", "model") == 1.0);
  CHECK(count(f, "tight-phone", "host") == 0);
  // The case says why, in show.
  ResultsStore store(options.db_path, Access::ReadOnly);
  const RunView view = load_run_view(store, 2);
  REQUIRE(view.cases.size() == 2);
  CHECK(view.cases[0].pricing.empty());
  REQUIRE(view.cases[1].pricing.size() == 1);
  CHECK_THAT(view.cases[1].pricing[0], Catch::Contains("below the host run's peak L1") && Catch::Contains("ran again"));
}

TEST_CASE("weights above a SoC's budget are still priced, with fits_in_memory 0 and the reason", "[sweep]") {
  const kvtest::TempDir dir("kvbench-sweep-nofit");
  SuiteConfig suite = parse_suite(sweep_suite(R"(["host"])"), "sweep.json", dir.path);
  suite.socs = {"host", "watch"};
  RunOptions options = quiet(dir);
  options.profiles.emplace("watch", small_soc("watch", 256.0 * (1 << 20)));  // 0.5B f16 weights are about 1 GB
  REQUIRE(run_suite(suite, options).status == RunStatus::Complete);
  const auto f = figures(options.db_path, 1);
  CHECK(value(f, "watch", "fits_in_memory", "model") == 0.0);
  CHECK(value(f, "watch", "memory_headroom_bytes", "model") < 0.0);
  CHECK(value(f, "watch", "capacity_rerun", "exact") == 0.0);
  CHECK(value(f, "watch", "tpot_ms_p50", "model") > 0.0);  // priced all the same
  CHECK(value(f, "host", "fits_in_memory", "model") == 1.0);
  ResultsStore store(options.db_path, Access::ReadOnly);
  const RunView view = load_run_view(store, 1);
  REQUIRE(view.cases[1].pricing.size() == 1);
  CHECK_THAT(view.cases[1].pricing[0], Catch::Contains("exceed the model budget") && Catch::Contains("fits_in_memory 0"));
}
