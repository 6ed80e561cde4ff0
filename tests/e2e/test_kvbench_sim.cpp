// End to end for the sim clock: `kvbench run --sim` counts each repetition's engine work under
// Valgrind's callgrind. Runs of a small case (L2 offload included) count the same on every span;
// a slowdown planted in work (test_repeat_attention) raises the attention's count by about its
// share; host and cpu figures are NULL in a sim run; a run without valgrind, or with a kernel path
// valgrind cannot run, is refused before anything is written. Release only ([whole-runs]): a
// sanitizer's binary does not run under valgrind.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <algorithm>
#include <map>
#include <regex>
#include <nlohmann/json.hpp>
#include <string>

#include "e2e/e2e_support.h"
#include "metric_table.h"
#include "test_support.h"

using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql;
using kvtest::sql_value;

namespace {

// A small case that offloads to L2: a 512-token prompt (every query attended) and 8 decode
// steps on one sampled layer of the 0.5B preset, L1 capped below its pages.
std::string small_suite(const std::string& policy_extra = "", const std::string& suite_extra = "") {
  return R"({"name": "sim-small", "repetitions": 1)" + suite_extra + R"(,
    "models": [{"name": "syn-0.5b", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag-512", "kind": "rag", "context_tokens": 512, "gen_tokens": 8}],
    "policies": [{"name": "q4-l2", "k": "q4", "v": "q4", "page_tokens": 32, "residual_tokens": 32,
                  "sparse": {"selector": "hybrid", "budget": 0.5, "window": 32, "sample_every": 8},
                  "memory": {"l0_bytes": "256KiB", "l1_bytes": "3MiB", "prefetch_lookahead": 2})" +
         policy_extra + "}]}";
}

// name -> value (or the reason it is NULL) of one run's figures on a clock.
std::map<std::string, std::string> figures(const std::string& db, const std::string& run, const std::string& clock) {
  std::map<std::string, std::string> out;
  for (const auto& row : sql(db, "SELECT m.name, coalesce(CAST(m.value AS INTEGER), 'NULL: ' || m.na_reason) FROM metrics m JOIN cases c "
                                 "ON c.id = m.case_id WHERE c.run_id = " + run + " AND m.clock = '" + clock + "'")) {
    out[row[0]] = row[1];
  }
  return out;
}

struct SimFixture {
  kvtest::TempDir dir{"kvbench-e2e-sim"};
  std::string db = dir.path + "/results.sqlite";
  std::string run(const std::string& suite_text, const std::string& name) {
    const std::string file = dir.path + "/" + name + ".json";
    kvtest::write_file(file, suite_text);
    const Output out = run_kvbench("run --suite " + file + " --db " + db + " --sim --json");
    INFO(out.text);
    REQUIRE(out.status == 0);
    return sql_value(db, "SELECT max(id) FROM runs");
  }
};

}  // namespace

TEST_CASE("kvbench run --sim counts the same work twice, and a repeat planted in work raises the attention's count", "[e2e][whole-runs][sim]") {
  SimFixture f;
  const std::string first = f.run(small_suite(), "base");
  const std::string second = f.run(small_suite(), "base");
  const auto a = figures(f.db, first, "sim"), b = figures(f.db, second, "sim");
  REQUIRE(a.size() == 2 * 4 * 4);  // phases x parts (total, attend, append, model_compute) x figures
  for (const auto& [name, value] : a) {  // every span: instructions, L1 and LL misses, estimated cycles
    INFO(name);
    CHECK(value == b.at(name));
  }
  for (const char* phase : {"prefill", "decode"}) {
    for (const char* part : {"total", "attend", "append"}) {
      const std::string name = kvbench::span_sim_metric_name(phase, part, "instructions");
      INFO(name << " = " << a.at(name));
      CHECK(std::stod(a.at(name)) > 0);
    }
    CHECK(a.at(kvbench::span_sim_metric_name(phase, "model_compute", "instructions")).find("NULL: the synthetic generator") == 0);
  }
  // The case offloaded: its L2 reads and writes ran on the counted thread.
  CHECK(std::stod(sql_value(f.db, "SELECT value FROM metric_values WHERE run_id = " + first + " AND name = 'swap_in_bytes'")) > 0);
  // Host and cpu figures are NULL in a sim run, exact and modelled ones kept.
  CHECK(sql_value(f.db, "SELECT count(*) FROM metric_values WHERE run_id = " + first +
                            " AND clock IN ('host', 'cpu') AND (value IS NOT NULL OR na_reason NOT LIKE 'a sim run:%')") == "0");
  CHECK(sql_value(f.db, "SELECT count(*) FROM metric_values WHERE run_id = " + first + " AND clock = 'host'") != "0");
  CHECK(sql_value(f.db, "SELECT value IS NOT NULL FROM metric_values WHERE run_id = " + first + " AND name = 'kv_bytes_per_token'") == "1");
  CHECK(sql_value(f.db, "SELECT value IS NOT NULL FROM metric_values WHERE run_id = " + first + " AND name = 'ttft_ms' AND clock = 'model'") == "1");
  // The run says how it counted: valgrind's version, the kernel path under it, one engine thread,
  // the pinned caches.
  const auto meta = nlohmann::json::parse(sql_value(f.db, "SELECT meta_json FROM runs WHERE id = " + first));
  REQUIRE(meta.contains("sim"));
  CHECK(meta["sim"]["valgrind"].get<std::string>().rfind("valgrind-", 0) == 0);
  CHECK_FALSE(meta["sim"]["kernel_path"].get<std::string>().empty());
  CHECK(meta["sim"]["kernel_path"] != "avx512");
  CHECK(meta["sim"]["engine_threads"] == 1);
  CHECK(meta["sim"]["caches"]["D1"] == "32 KiB 8-way, 64-byte lines");
  CHECK(meta["sim"]["caches"]["LL"] == "8 MiB 16-way, 64-byte lines");

  // A quarter of every attention call's page kernels again: the attention's count rises, the
  // appends' hardly moves (only the allocator's paths, its heap now holding the repeats'
  // scratch: up to 0.14% of the decode appends' count seen), the exact figures do not move at all.
  const std::string slower = f.run(small_suite(R"(, "test_repeat_attention": 0.25)"), "slower");
  const auto c = figures(f.db, slower, "sim");
  for (const char* phase : {"prefill", "decode"}) {
    const double base = std::stod(a.at(kvbench::span_sim_metric_name(phase, "attend", "instructions")));
    const double slow = std::stod(c.at(kvbench::span_sim_metric_name(phase, "attend", "instructions")));
    INFO(phase << " attend instructions " << base << " -> " << slow);
    CHECK(slow > base * 1.05);
    CHECK(slow < base * 1.25);
    const double append = std::stod(a.at(kvbench::span_sim_metric_name(phase, "append", "instructions")));
    CHECK(std::abs(std::stod(c.at(kvbench::span_sim_metric_name(phase, "append", "instructions"))) - append) < append * 3e-3);
  }
  CHECK(figures(f.db, slower, "exact") == figures(f.db, first, "exact"));
}

TEST_CASE("kvbench run --sim without valgrind, or with a kernel path valgrind cannot run, is refused before anything is written", "[e2e][sim]") {
  kvtest::TempDir dir("kvbench-e2e-sim-refused");
  const std::string db = dir.path + "/results.sqlite";
  const std::string suite = dir.path + "/suite.json";
  kvtest::write_file(suite, small_suite());
  {
    const kvtest::ScopedEnv path("PATH", dir.path);  // no valgrind there
    const Output out = run_kvbench("run --suite " + suite + " --db " + db + " --sim");
    INFO(out.text);
    CHECK(out.status == 2);
    CHECK(out.text.find("valgrind is not on PATH") != std::string::npos);
  }
  const std::string avx512 = dir.path + "/avx512.json";
  kvtest::write_file(avx512, small_suite(R"(, "isa": "avx512")"));
  const Output out = run_kvbench("run --suite " + avx512 + " --db " + db + " --sim");
  INFO(out.text);
  CHECK(out.status == 2);
  CHECK(out.text.find("/policies/0/isa") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(db));
}

TEST_CASE("a sim run counts the same work with a core kept busy by another process", "[.][contention][sim]") {
  SimFixture f;
  const std::string idle = f.run(small_suite(), "idle");
  std::string busy;
  {
    kvtest::BusyCore core(-1, 120);
    busy = f.run(small_suite(), "busy");
  }
  CHECK(figures(f.db, idle, "sim") == figures(f.db, busy, "sim"));
}

namespace {

// The smallest sim case: one 256-token prompt and 8 decode steps.
std::string tiny_suite(const std::string& policy_extra = "") {
  return R"({"name": "sim-tiny", "repetitions": 1, "sim": true,
    "models": [{"name": "syn-0.5b", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag-256", "kind": "rag", "context_tokens": 256, "gen_tokens": 8}],
    "policies": [{"name": "q4", "k": "q4", "v": "q4", "page_tokens": 16, "residual_tokens": 16,
                  "sparse": {"selector": "hybrid", "budget": 0.5, "window": 32, "sample_every": 8})" +
         policy_extra + "}]}";
}

}  // namespace

TEST_CASE("a sim row regresses the gate and ab, named with both counts and the change", "[e2e][whole-runs][sim]") {
  SimFixture f;
  const std::string base_file = f.dir.path + "/tiny.json", slow_file = f.dir.path + "/slow.json";
  kvtest::write_file(base_file, tiny_suite());
  kvtest::write_file(slow_file, tiny_suite(R"(, "test_repeat_attention": 0.25)"));
  const Output a = run_kvbench("run --suite " + base_file + " --db " + f.db + " --json");
  const Output b = run_kvbench("run --suite " + base_file + " --db " + f.db + " --json");
  const Output c = run_kvbench("run --suite " + slow_file + " --db " + f.db + " --json");
  INFO(a.text << b.text << c.text);
  REQUIRE((a.status == 0 && b.status == 0 && c.status == 0));
  // A/A: every sim row unchanged, the gate passes.
  const Output same = run_kvbench("gate --baseline 1 --candidate 2 --db " + f.db);
  INFO(same.text);
  CHECK(same.status == 0);
  CHECK(same.text.find("0 regressed, 0 unreliable") != std::string::npos);
  // The planted repeat: the decode and prefill totals regress, each with both counts in full.
  const std::string json = f.dir.path + "/gate.json", md = f.dir.path + "/gate.md", junit = f.dir.path + "/gate.xml";
  const Output slower = run_kvbench("gate --baseline 1 --candidate 3 --db " + f.db + " --json " + json + " --markdown " + md + " --junit " + junit);
  INFO(slower.text);
  CHECK(slower.status == 1);
  const std::regex line(R"(regressed syn-0.5b/rag-256/q4/host span_decode_total_sim_instructions: ([0-9,]+) -> ([0-9,]+) \+([0-9,]+) \(\+([0-9.]+)%\))");
  std::smatch m;
  REQUIRE(std::regex_search(slower.text, m, line));
  const auto number = [](std::string s) {
    s.erase(std::remove(s.begin(), s.end(), ','), s.end());
    return std::stod(s);
  };
  CHECK(number(m[2]) - number(m[1]) == number(m[3]));
  CHECK(std::stod(m[4]) > 1.0);
  const auto gate = nlohmann::json::parse(kvtest::read_file(json));
  int regressed_sim = 0;
  for (const auto& row : gate["rows"]) {
    if (row["verdict"] == "regressed" && row["metric"].get<std::string>().find("_sim_") != std::string::npos) ++regressed_sim;
  }
  CHECK(regressed_sim >= 2);  // decode and prefill
  CHECK(kvtest::read_file(md).find("span_decode_total_sim_instructions") != std::string::npos);
  CHECK(kvtest::read_file(junit).find("span_decode_total_sim_instructions") != std::string::npos);
  // ab --sim: one counted repetition a side is enough, and the same repeat regresses there too.
  const std::string ab_db = f.dir.path + "/ab.sqlite";
  const Output ab = run_kvbench("ab --baseline-bin " + std::string(KVBENCH_BIN) + " --candidate-bin " + KVBENCH_BIN + " --suite " + base_file +
                                " --candidate-suite " + slow_file + " --sim --repetitions 1 --db " + ab_db);
  INFO(ab.text);
  CHECK(ab.status == 1);
  CHECK(ab.text.find("regressed syn-0.5b/rag-256/q4/host span_decode_total_sim_instructions") != std::string::npos);
  // Without --sim a single repetition is refused.
  const Output one = run_kvbench("ab --baseline-bin " + std::string(KVBENCH_BIN) + " --candidate-bin " + KVBENCH_BIN + " --suite " + base_file +
                                 " --repetitions 1 --db " + ab_db);
  CHECK(one.status == 2);
  CHECK(one.text.find("1 is enough with --sim") != std::string::npos);
}
