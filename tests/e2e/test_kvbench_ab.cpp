// End to end: `kvbench ab` with one binary as both sides on a one-case suite. Two merged runs
// whose repetitions interleave in time, every case in both, the comparison printed; with a
// candidate suite carrying test_slowdown 1.0, the gate on its runs fails.
#include <catch2/catch.hpp>
#include <string>

#include "e2e/e2e_support.h"
#include "test_support.h"

using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;

namespace {

std::string ab_suite(const std::string& extra) {
  return R"({"name": "ab", "repetitions": 1, "warmup": 0, "noise_threshold": 1.0,
    "models": [{"name": "syn-7b", "backend": "synthetic", "preset": "llama-7b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag-1k", "kind": "rag", "context_tokens": 1024, "gen_tokens": 16}],
    "policies": [{"name": "q4-hybrid", "k": "q4", "v": "q4", "sparse": {"selector": "hybrid", "window": 64, "budget": 0.25})" + extra + "}]}";
}

}  // namespace

TEST_CASE("kvbench ab interleaves one binary against itself and merges two comparable runs", "[e2e][whole-runs][ab]") {
  const kvtest::TempDir dir("kvbench-e2e-ab");
  const std::string db = dir.path + "/results.sqlite", file = dir.path + "/ab.json";
  kvtest::write_file(file, ab_suite(""));
  const std::string bin = KVBENCH_BIN;
  // Only deterministic rows are gated here: the merge is under test, not this machine's timings
  // beside CTest's other tests (the [contention] and [gate-timed] tests gate timings).
  const std::string rules = dir.path + "/exact-only.json";
  kvtest::write_file(rules, R"({"rules": [
    {"metric": "*_ms", "gated": false}, {"metric": "*_ms_*", "gated": false}, {"metric": "*_tps", "gated": false},
    {"metric": "*_instructions", "gated": false}, {"metric": "goodput", "gated": false},
    {"metric": "swap_*_gb_per_s", "gated": false}, {"metric": "peak_rss_bytes", "gated": false}]})");
  const Output out = run_kvbench("ab --baseline-bin " + bin + " --candidate-bin " + bin + " --suite " + file + " --repetitions 4 --rules " +
                                 rules + " --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK(out.text.find("ab: pass") != std::string::npos);
  CHECK(out.text.find("interleaved A/B: 1 cases x 4 repetitions per side") != std::string::npos);
  CHECK(out.text.find("candidate run 2 against baseline run 1 (suite ab)") != std::string::npos);
  // ab compares within pairs (compare_paired_samples), and says so.
  CHECK(out.text.find("(host timings: paired t-test on the per-pair log ratios,") != std::string::npos);
  CHECK(out.text.find("Welch") == std::string::npos);
  CHECK(sql_value(db, "SELECT group_concat(tags, ' ') FROM runs") == "ab:baseline ab:candidate");
  CHECK(sql_value(db, "SELECT count(DISTINCT c.name) FROM cases c") == "1");
  CHECK(sql_value(db, "SELECT count(DISTINCT repetition) FROM metric_values WHERE run_id = 2") == "4");
  CHECK(sql_value(db, "SELECT json_extract(meta_json, '$.ab.candidate_version') LIKE 'kvbench %' FROM runs WHERE id = 2") == "1");
  // The children ran in turn: A B, B A, A B, B A.
  CHECK(sql_value(db, "SELECT group_concat(substr(json_extract(value, '$.side'), 1, 1), '') FROM runs, json_each(json_extract(meta_json, '$.ab.schedule'))"
                   " WHERE runs.id = 2") == "bccbbccb");
  // Exact figures agree between the sides: the same binary and suite.
  CHECK(out.text.find("regressed syn-7b/rag-1k/q4-hybrid/host kv_bytes_per_token") == std::string::npos);
  // A binary that is not kvbench is refused, named.
  const Output bad = run_kvbench("ab --baseline-bin /bin/true --candidate-bin " + bin + " --suite " + file + " --db " + db);
  CHECK(bad.status == 2);
  CHECK(bad.text.find("/bin/true: --baseline-bin: not a kvbench binary") != std::string::npos);
}

// Timed: run alone by ci/test.sh with the other [gate-timed] tests.
TEST_CASE("kvbench ab with test_slowdown 1.0 in the candidate suite fails the gate", "[.][gate-timed]") {
  const kvtest::TempDir dir("kvbench-e2e-ab-slow");
  const std::string db = dir.path + "/results.sqlite", base = dir.path + "/base.json", slow = dir.path + "/slow.json";
  kvtest::write_file(base, ab_suite(""));
  kvtest::write_file(slow, ab_suite(R"(, "test_slowdown": 1.0)"));
  const std::string bin = KVBENCH_BIN;
  // ab compares within its pairs and exits like the gate.
  const Output ab = run_kvbench("ab --baseline-bin " + bin + " --candidate-bin " + bin + " --suite " + base + " --candidate-suite " + slow +
                                " --repetitions 6 --db " + db);
  INFO(ab.text);
  REQUIRE(ab.status == 1);
  CHECK(ab.text.find("ab: FAIL") != std::string::npos);
  const Output gate = run_kvbench("gate --baseline latest:ab:baseline --candidate latest:ab:candidate --db " + db);
  INFO(gate.text);
  CHECK(gate.status == 1);
  CHECK(gate.text.find("regressed syn-7b/rag-1k/q4-hybrid/host span_decode_total_cpu_ms:") != std::string::npos);
  CHECK(gate.text.find("config changed syn-7b/rag-1k/q4-hybrid/host: policies.test_slowdown: 0.0 -> 1.0") != std::string::npos);
}
