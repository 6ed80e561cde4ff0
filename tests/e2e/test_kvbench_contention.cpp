// End to end under real contention: a child process keeps one of the machine's cores busy while
// kvbench runs. Repetitions are flagged noisy by the engine threads' run-queue wait, the CPU-time
// rows still judge them (at the baseline's core speed), a slowed-down candidate fails the gate
// (regressed, or undecided by noise: never a pass), and `kvbench ab` does the same within its
// pairs. Run alone by ci/test.sh's contention step.
#include <catch2/catch.hpp>
#include <string>

#include "e2e/e2e_support.h"
#include "test_support.h"

using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;

namespace {

// The gate trial's one-case suite (bench/suites/gate-trial.json) with the default noise threshold.
std::string contention_suite(const std::string& extra) {
  return R"({"name": "trial", "repetitions": 5, "warmup": 1,
    "models": [{"name": "syn-0.5b", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag-4k", "kind": "rag", "context_tokens": 4096, "gen_tokens": 16}],
    "policies": [{"name": "q4-hybrid", "k": "q4", "v": "q4", "residual_tokens": 64,
                  "sparse": {"selector": "hybrid", "budget": 0.25, "sample_every": 8})" + extra + "}]}";
}

struct ContentionFixture {
  kvtest::TempDir dir{"kvbench-e2e-contention"};
  std::string db = dir.path + "/results.sqlite";
  std::string base = dir.path + "/base.json", slow = dir.path + "/slow.json";
  ContentionFixture() {
    kvtest::write_file(base, contention_suite(""));
    kvtest::write_file(slow, contention_suite(R"(, "test_slowdown": 0.25)"));
  }
  std::string run(const std::string& suite_file) {
    const Output out = run_kvbench("run --suite " + suite_file + " --db " + db + " --json");
    INFO(out.text);
    REQUIRE(out.status == 0);
    return sql_value(db, "SELECT max(id) FROM runs");
  }
};

}  // namespace

TEST_CASE("on a busy machine the gate fails a slowdown by CPU time and flags the noise", "[.][contention]") {
  ContentionFixture f;
  const std::string baseline = f.run(f.base);
  std::string same, slower;
  {
    kvtest::BusyCore busy(-1, 120);
    same = f.run(f.base);
    slower = f.run(f.slow);
  }
  // The busy core shows as the engine threads' run-queue wait, and noisy repetitions.
  const std::string share = sql_value(f.db, "SELECT avg(value) FROM metric_values WHERE run_id = " + slower + " AND name = 'noise_run_queue_share'");
  const std::string noisy = sql_value(f.db, "SELECT count(*) FROM metric_values WHERE run_id = " + slower + " AND name = 'tpot_ms_p50' AND noisy = 1");
  INFO("mean run-queue share under contention " << share << ", noisy repetitions " << noisy);
  CHECK(std::stod(share) > 0.0);
  // CPU-time figures are recorded and never flagged noisy.
  CHECK(sql_value(f.db, "SELECT count(*) FROM metric_values WHERE run_id = " + slower +
                         " AND name = 'span_decode_total_cpu_ms' AND clock = 'cpu' AND value > 0 AND noisy = 0") == "5");

  // The core-speed probe ran around every repetition.
  CHECK(sql_value(f.db, "SELECT count(*) FROM metric_values WHERE run_id = " + slower +
                         " AND name = 'noise_cpu_probe_ms' AND clock = 'cpu' AND value > 0") == "5");

  // The slowdown fails: found (1), or left undecided by noise (5), never a pass.
  const Output slow_gate = run_kvbench("gate --baseline " + baseline + " --candidate " + slower + " --db " + f.db + " --json " + f.dir.path + "/slow.json.out");
  INFO(slow_gate.text);
  CHECK((slow_gate.status == 1 || slow_gate.status == 5));
  if (slow_gate.status == 1) CHECK(slow_gate.text.find("regressed syn-0.5b/rag-4k/q4-hybrid/host span_") != std::string::npos);
  if (slow_gate.status == 5) CHECK(slow_gate.text.find("is inconclusive too") != std::string::npos);

  const Output same_gate = run_kvbench("gate --baseline " + baseline + " --candidate " + same + " --db " + f.db);
  INFO(same_gate.text);
  // No false regression; and when noise leaves a row undecided the gate says so (5), never 0.
  CHECK(same_gate.status != 1);
  if (same_gate.status == 0) CHECK(same_gate.text.find("gate: pass") != std::string::npos);
  if (same_gate.status != 0) CHECK(same_gate.status == 5);
}

TEST_CASE("kvbench ab on a busy machine never passes a slowdown", "[.][contention]") {
  ContentionFixture f;
  const std::string bin = KVBENCH_BIN;
  kvtest::BusyCore busy(-1, 300);
  const Output out = run_kvbench("ab --baseline-bin " + bin + " --candidate-bin " + bin + " --suite " + f.base + " --candidate-suite " +
                                 f.slow + " --repetitions 5 --db " + f.db);
  INFO(out.text);
  CHECK((out.status == 1 || out.status == 5));
  CHECK(out.text.find(out.status == 1 ? "ab: FAIL" : "ab: UNRELIABLE") != std::string::npos);
}
