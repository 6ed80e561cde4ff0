// End to end through the real binary: `kvbench run` into temporary databases, then SQL over
// metric_values; a run killed with SIGKILL; two runs writing one database at once; a newer
// schema; malformed suites. KVBENCH_BIN is the kvbench built beside these tests.
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "case_metrics.h"
#include "e2e/e2e_support.h"
#include "test_support.h"

namespace fs = std::filesystem;

namespace {

using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;
using kvtest::sql;
using kvtest::write_file;

// The smoke suite run once into a database shared by the checks below.
const std::string& smoke_db() {
  static const std::string path = [] {
    static kvtest::TempDir dir("kvbench-e2e-smoke");
    const std::string db = dir.path + "/results.sqlite";
    const Output out = run_kvbench("run --suite smoke --db " + db + " --tag e2e --json");
    INFO(out.text);
    REQUIRE(out.status == 0);
    REQUIRE(out.text.find("\"status\":\"complete\"") != std::string::npos);
    return db;
  }();
  return path;
}

}  // namespace

TEST_CASE("kvbench run --suite smoke records every contract metric for every case", "[e2e][whole-runs]") {
  const std::string& db = smoke_db();
  REQUIRE(sql_value(db, "SELECT count(*) FROM runs WHERE status = 'complete' AND tags = 'e2e'") == "1");
  const auto cases = sql(db, "SELECT name, status FROM cases");
  REQUIRE(cases.size() == 8);  // 4 workloads x 2 policies
  std::set<std::string> workloads;
  for (const auto& c : cases) {
    CHECK(c[1] == "complete");
    workloads.insert(c[0].substr(c[0].find('/') + 1, c[0].find('/', c[0].find('/') + 1) - c[0].find('/') - 1));
  }
  CHECK(workloads == std::set<std::string>{"rag-2k", "codebase-4k", "roleplay-4t", "multimodal-1i"});

  // Every contract metric, for every case and each of smoke's 3 repetitions: a finite value or
  // NULL with a reason.
  CHECK(sql_value(db, "SELECT max(repetition) FROM metric_values") == "3");
  for (const auto& c : cases) {
    for (int rep = 1; rep <= 3; ++rep) {
      const auto rows = sql(db, "SELECT name, value, na_reason, clock FROM metric_values WHERE case_name = '" + c[0] +
                                    "' AND repetition = " + std::to_string(rep));
      std::map<std::string, std::vector<std::string>> by_name;
      for (const auto& r : rows) by_name[r[0]] = r;
      for (const std::string& name : kvbench::contract_metric_names()) {
        INFO(c[0] << " repetition " << rep << " metric " << name);
        REQUIRE(by_name.count(name) == 1);
        const auto& r = by_name[name];
        if (r[1] == "NULL") {
          CHECK(!r[2].empty());
        } else {
          CHECK(std::isfinite(std::stod(r[1])));
        }
      }
    }
  }
  // The key figures are finite everywhere.
  for (const char* name : {"ttft_ms", "tpot_ms_p50", "tpot_ms_p99", "decode_tps", "peak_l0_bytes", "peak_l1_bytes", "peak_rss_bytes",
                           "kv_bytes_per_token", "token_drop_ratio", "attn_mass_recall", "scale_drift_mean", "needle_recall"}) {
    INFO(name);
    CHECK(sql_value(db, std::string("SELECT count(*) FROM metric_values WHERE name = '") + name + "' AND value IS NULL") == "0");
  }
  // Clocks: timings host and model (each host case priced with the host profile), counts
  // exact; the synthetic backend's timings are extrapolated on both clocks.
  CHECK(sql_value(db, "SELECT count(*) FROM metric_values WHERE name = 'ttft_ms' AND (clock NOT IN ('host', 'model') OR extrapolated != 1)") == "0");
  CHECK(sql_value(db, "SELECT count(*) FROM metric_values WHERE name = 'ttft_ms' AND clock = 'host'") ==
        sql_value(db, "SELECT count(*) FROM metric_values WHERE name = 'ttft_ms' AND clock = 'model'"));
  CHECK(sql_value(db, "SELECT count(*) FROM metric_values WHERE name = 'kv_bytes_per_token' AND clock != 'exact'") == "0");
  // The sim clock's figures are a sim run's alone (kvbench run --sim): absent here.
  CHECK(sql_value(db, "SELECT count(*) FROM metric_values WHERE clock = 'sim' OR name LIKE '%_sim_%'") == "0");
  // Deterministic figures repeat exactly across repetitions (one seed for all).
  CHECK(sql_value(db, "SELECT count(*) FROM (SELECT case_name, name FROM metric_values WHERE clock = 'exact' AND name != 'peak_rss_bytes'"
                   " GROUP BY case_name, name HAVING count(DISTINCT coalesce(value, na_reason)) > 1)") == "0");
  // The tight policy offloads; q4 stores fewer bytes per token than f16; sparse drops tokens.
  CHECK(std::stod(sql_value(db, "SELECT min(value) FROM metric_values WHERE policy = 'q4-hybrid-tight' AND name = 'swap_out_bytes'")) > 0);
  CHECK(std::stod(sql_value(db, "SELECT max(value) FROM metric_values WHERE policy = 'q4-hybrid-tight' AND name = 'kv_compression_ratio'")) > 3.0);
  CHECK(std::stod(sql_value(db, "SELECT min(value) FROM metric_values WHERE policy = 'q4-hybrid-tight' AND name = 'token_drop_ratio'")) > 0.1);
  CHECK(sql_value(db, "SELECT max(value) FROM metric_values WHERE policy = 'f16-full' AND name = 'token_drop_ratio'") == "0.0");
  // Series and events are there too.
  CHECK(std::stoi(sql_value(db, "SELECT count(*) FROM series WHERE name = 'tpot_ms'")) > 0);
  CHECK(std::stoi(sql_value(db, "SELECT count(*) FROM events WHERE kind = 'pressure'")) > 0);
  // Metadata: machine, config and its hash.
  CHECK(sql_value(db, "SELECT json_extract(meta_json, '$.cores') > 0 FROM runs") == "1");
  CHECK(sql_value(db, "SELECT json_extract(config_json, '$.policies[1].memory.l1_bytes') FROM runs") == "71303168");
  CHECK(sql_value(db, "SELECT length(config_hash) FROM runs") == "16");
}

TEST_CASE("kvbench list, show and export read a run", "[e2e]") {
  // A small run of its own: CTest runs every test case in its own process.
  const kvtest::TempDir temp("kvbench-e2e-read");
  const std::string db = temp.path + "/results.sqlite";
  REQUIRE(run_kvbench("run --suite smoke --filter multimodal-1i/q4 --repetitions 1 --db " + db).status == 0);
  Output out = run_kvbench("list runs --db " + db);
  CHECK(out.status == 0);
  CHECK(out.text.find("complete") != std::string::npos);
  out = run_kvbench("show 1 --db " + db);
  CHECK(out.status == 0);
  CHECK(out.text.find("every case: model syn-7b, soc host") != std::string::npos);
  CHECK(out.text.find("\nmultimodal-1i/q4-hybrid-tight") != std::string::npos);
  out = run_kvbench("export 1 --format csv --db " + db);
  CHECK(out.status == 0);
  CHECK(out.text.rfind("run_id,run_status,case_name", 0) == 0);
  const std::string json_path = fs::path(db).parent_path() / "run1.json";
  out = run_kvbench("export 1 --format json --db " + db + " --out " + json_path);
  CHECK(out.status == 0);
  std::ifstream in(json_path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.find("\"kv_bytes_per_token\"") != std::string::npos);
  // Every stored figure: the series (per step and per request) and histograms as stored.
  const auto doc = nlohmann::json::parse(text);
  REQUIRE(doc["cases"].size() == 1);
  const auto& exported = doc["cases"][0];
  const auto find = [](const nlohmann::json& list, const std::string& name) {
    for (const auto& item : list) {
      if (item["name"] == name) return item;
    }
    return nlohmann::json();
  };
  CHECK(exported["series"].size() == std::stoul(sql_value(db, "SELECT count(DISTINCT repetition || name) FROM series")));
  CHECK(exported["histograms"].size() == std::stoul(sql_value(db, "SELECT count(DISTINCT repetition || name) FROM histograms")));
  for (const char* name : {"tpot_ms", "request_tpot_ms"}) {  // per step, per request
    INFO(name);
    const auto series = find(exported["series"], name);
    REQUIRE(series.is_object());
    CHECK(series["repetition"] == 1);
    CHECK(series["values"].size() == std::stoul(sql_value(db, std::string("SELECT count(*) FROM series WHERE name = '") + name + "'")));
    CHECK(series["values"][0].get<double>() ==
          Approx(std::stod(sql_value(db, std::string("SELECT value FROM series WHERE name = '") + name + "' AND step = 0"))).epsilon(1e-12));
  }
  const auto histogram = find(exported["histograms"], "importance_score");
  REQUIRE(histogram.is_object());
  CHECK(histogram["counts"].size() == std::stoul(sql_value(db, "SELECT count(*) FROM histograms WHERE name = 'importance_score'")));
  CHECK(histogram["counts"].dump() == "[" + sql_value(db, "SELECT group_concat(count) FROM (SELECT count FROM histograms WHERE "
                                                         "name = 'importance_score' ORDER BY bin)") + "]");
  out = run_kvbench("show 99 --db " + db);
  CHECK(out.status == 2);
  CHECK(out.text.find("no run 99") != std::string::npos);
}

TEST_CASE("a run killed with SIGKILL is aborted and earlier runs stay intact", "[e2e]") {
  const kvtest::TempDir temp("kvbench-e2e-kill");
  const std::string dir = temp.path;
  const std::string db = dir + "/results.sqlite";
  REQUIRE(run_kvbench("run --suite smoke --filter rag-2k/f16 --repetitions 1 --db " + db).status == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::execl(KVBENCH_BIN, KVBENCH_BIN, "run", "--suite", "smoke", "--db", db.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Kill it once it has stored at least one repetition of the second run.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  bool stored = false;
  while (!stored && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (fs::exists(db)) {
      const std::string n = kvtest::sql_value_if_ready(db, "SELECT count(*) FROM metrics m JOIN cases c ON c.id = m.case_id WHERE c.run_id = 2");
      stored = !n.empty() && n != "0";
    }
  }
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  REQUIRE(stored);
  // Readers report the dead run as aborted without writing; the next writer marks it.
  Output out = run_kvbench("list runs --status aborted --json --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK(out.text.find("\"id\": 2") != std::string::npos);
  CHECK(out.text.find("\"id\": 1") == std::string::npos);
  CHECK(sql_value(db, "SELECT status FROM runs WHERE id = 2") == "running");
  out = run_kvbench("show 2 --db " + db);
  CHECK(out.text.find("run 2 [aborted]") != std::string::npos);
  CHECK(out.text.find("the run was aborted") != std::string::npos);
  REQUIRE(run_kvbench("run --suite smoke --filter rag-2k/f16 --repetitions 1 --db " + db).status == 0);
  CHECK(sql_value(db, "SELECT status FROM runs WHERE id = 1") == "complete");
  CHECK(sql_value(db, "SELECT status FROM runs WHERE id = 2") == "aborted");
  CHECK(std::stoi(sql_value(db, "SELECT count(*) FROM metric_values WHERE run_id = 1")) > 30);
  CHECK(sql_value(db, "PRAGMA integrity_check") == "ok");
}

TEST_CASE("two concurrent runs into one database both complete", "[e2e][whole-runs]") {
  const kvtest::TempDir temp("kvbench-e2e-concurrent");
  const std::string dir = temp.path;
  const std::string db = dir + "/results.sqlite";
  const std::string args = " --repetitions 1 --json --db " + db;
  Output first, second;
  std::thread a([&] { first = run_kvbench("run --suite smoke --filter 'rag-2k|roleplay'" + args); });
  std::thread b([&] { second = run_kvbench("run --suite smoke --filter 'multimodal|rag-2k/f16'" + args); });
  a.join();
  b.join();
  INFO(first.text << second.text);
  CHECK(first.status == 0);
  CHECK(second.status == 0);
  CHECK(sql_value(db, "SELECT count(*) FROM runs WHERE status = 'complete'") == "2");
  CHECK(sql_value(db, "SELECT count(*) FROM cases") == "7");
}

TEST_CASE("a database with a newer schema is refused", "[e2e]") {
  const kvtest::TempDir temp("kvbench-e2e-schema");
  const std::string dir = temp.path;
  const std::string db = dir + "/results.sqlite";
  sqlite3* handle = nullptr;
  REQUIRE(sqlite3_open(db.c_str(), &handle) == SQLITE_OK);
  REQUIRE(sqlite3_exec(handle, "CREATE TABLE runs (id INTEGER); PRAGMA user_version = 99;", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(handle);
  for (const std::string& args : {"list runs --db " + db, "run --suite smoke --filter rag-2k/f16 --repetitions 1 --db " + db}) {
    const Output out = run_kvbench(args);
    INFO(out.text);
    CHECK(out.status == 2);
    CHECK(out.text.find(db) != std::string::npos);
    CHECK(out.text.find("schema version 99") != std::string::npos);
  }
  CHECK(sql_value(db, "PRAGMA user_version") == "99");
}

TEST_CASE("kvbench run refuses malformed suites with the file, the JSON path and the reason", "[e2e]") {
  const kvtest::TempDir temp("kvbench-e2e-suites");
  const std::string dir = temp.path;
  const std::string good_policy = R"({"name": "p", "k": "q4", "v": "q4", "sparse": {"selector": "hybrid", "budget": 0.1}})";
  const std::string head = R"({"name": "bad", "models": [{"name": "m", "backend": "synthetic", "preset": "qwen-0.5b-gqa"}],
    "workloads": [{"name": "w", "kind": "rag", "context_tokens": 1024}], )";
  struct Bad {
    std::string name, text, path, reason;
  };
  const std::vector<Bad> cases = {
      {"unknown", head + R"("policies": [)" + good_policy + R"(], "colour": 1})", "/colour", "unknown field"},
      {"duplicate", head + R"("policies": [)" + good_policy + R"(], "seed": 1, "seed": 2})", "seed", "duplicate key"},
      {"type", head + R"("policies": [)" + good_policy + R"(], "repetitions": "five"})", "/repetitions", "must be an integer"},
      // The README's tutorial quotes this message.
      {"budget", head + R"("policies": [{"name": "p", "sparse": {"selector": "quest", "budget": 1.5}}]})", "/policies/0/sparse/budget",
       "/policies/0/sparse/budget: must be in (0, 1] (1.5)"},
      {"budget-zero", head + R"("policies": [{"name": "p", "sparse": {"selector": "quest", "budget": 0}}]})", "/policies/0/sparse/budget",
       "must be in (0, 1] (0)"},
      {"pinned-only-window", head + R"("policies": [{"name": "p", "sparse": {"selector": "window", "allow_pinned_only": true}}]})",
       "/policies/0/sparse/allow_pinned_only", "selector window takes no budget"},
      {"budget-pages-zero", head + R"("policies": [{"name": "p", "sparse": {"selector": "quest", "budget_pages": 0}}]})",
       "/policies/0/sparse/budget_pages", "must be >= 1 (0)"},
      {"window", head + R"("policies": [{"name": "p", "sparse": {"selector": "window", "window": 1000000}}]})",
       "/policies/0/sparse/window", "larger than model"},
      {"l0", head + R"("policies": [{"name": "p", "memory": {"l0_bytes": "64MiB", "l1_bytes": "32MiB"}}]})",
       "/policies/0/memory/l0_bytes", "L0 is larger than L1 (64.0 MiB > l1_bytes 32.0 MiB)"},
      {"l1", head + R"("policies": [{"name": "p", "memory": {"l1_bytes": "1KiB"}}]})", "/policies/0/memory/l1_bytes",
       "L1 is smaller than the L0 arena (1.00 KiB < the default l0_bytes"},
      {"size", head + R"("policies": [{"name": "p", "memory": {"l1_bytes": "12 parsecs"}}]})", "/policies/0/memory/l1_bytes",
       "not a unit"},
      {"kind", R"({"name": "bad", "models": [{"name": "m", "backend": "synthetic", "preset": "qwen-0.5b-gqa"}],
        "workloads": [{"name": "w", "kind": "poetry"}], "policies": [{"name": "p"}]})", "/workloads/0/kind", "not a workload kind"},
      {"syntax", R"({"name": "bad", )", "byte", "malformed JSON"},
      {"ignored", R"({"name": "bad", "models": [{"name": "m", "backend": "synthetic", "preset": "qwen-0.5b-gqa"}],
        "workloads": [{"name": "w", "kind": "rag", "turns": 4}], "policies": [{"name": "p"}]})", "/workloads/0/turns",
       "a rag workload does not use it (only roleplay does)"},
      {"slash", head + R"("policies": [{"name": "q4/fast"}]})", "/policies/0/name", "must not contain '/': it separates a case's parts (\"q4/fast\")"},
      {"escape", head + "\"policies\": [{\"name\": \"p\\u001b[31m\"}]}", "/policies/0/name", "must be printable: no control characters"},
      {"newline", R"({"name": "two\nlines", "models": [{"name": "m", "backend": "synthetic", "preset": "qwen-0.5b-gqa"}],
        "workloads": [{"name": "w", "kind": "rag"}], "policies": [{"name": "p"}]})", "/name", "must be printable"},
      {"empty", R"({"name": "", "models": [{"name": "m", "backend": "synthetic", "preset": "qwen-0.5b-gqa"}],
        "workloads": [{"name": "w", "kind": "rag"}], "policies": [{"name": "p"}]})", "/name", "must not be empty"},
      {"overflow", head + R"("policies": [{"name": "p", "sparse": {"selector": "quest", "budget": 1e400}}]})",
       "/policies/0/sparse/budget", "number beyond a double's range ('1e400')"},
      {"overflow-in-array", head + R"("policies": [{"name": "p"}], "seeds": [1, -2e999]})", "/seeds/1", "beyond a double's range"},
  };
  for (const Bad& bad : cases) {
    const std::string suite = dir + "/" + bad.name + ".json";
    const std::string db = dir + "/" + bad.name + ".sqlite";
    write_file(suite, bad.text);
    const Output out = run_kvbench("run --suite " + suite + " --db " + db);
    INFO(bad.name << ": " << out.text);
    CHECK(out.status == 2);
    CHECK(out.text.find(suite) != std::string::npos);
    CHECK(out.text.find(bad.path) != std::string::npos);
    CHECK(out.text.find(bad.reason) != std::string::npos);
    CHECK_FALSE(fs::exists(db));  // nothing written
  }
  // Checked against this machine before anything is stored: a kernel path the CPU lacks, a
  // policy's L2 directory that does not exist.
#if defined(__aarch64__)
  const std::string foreign_isa = "avx2";
#else
  const std::string foreign_isa = "neon";
#endif
  struct Machine {
    std::string name, policy, path, reason;
  };
  const std::vector<Machine> machine = {
      {"isa", R"({"name": "p", "isa": ")" + foreign_isa + R"("})", "/policies/0/isa", "cannot run the " + foreign_isa + " kernels"},
      {"l2", R"({"name": "p", "memory": {"l1_bytes": "64MiB", "l2_dir": "/no/such/l2"}})", "/policies/0/memory/l2_dir",
       "does not exist (/no/such/l2)"},
  };
  for (const Machine& bad : machine) {
    const std::string suite = dir + "/" + bad.name + ".json";
    const std::string db = dir + "/" + bad.name + ".sqlite";
    write_file(suite, head + R"("policies": [)" + bad.policy + "]}");
    const Output out = run_kvbench("run --suite " + suite + " --db " + db);
    INFO(bad.name << ": " << out.text);
    CHECK(out.status == 2);
    CHECK(out.text.find(suite + ": " + bad.path + ": ") != std::string::npos);
    CHECK(out.text.find(bad.reason) != std::string::npos);
    CHECK_FALSE(fs::exists(db));  // no run row, failed or otherwise
  }
  // A --db in a directory that does not exist is refused, and no directory is made.
  const Output nowhere = run_kvbench("run --suite smoke --db " + dir + "/no/such/dir/x.sqlite");
  INFO(nowhere.text);
  CHECK(nowhere.status == 2);
  CHECK(nowhere.text.find(dir + "/no/such/dir/x.sqlite: --db: its directory does not exist") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/no"));
  const Output missing = run_kvbench("run --suite no-such-suite --db " + dir + "/x.sqlite");
  CHECK(missing.status == 2);
  CHECK(missing.text.find("neither a built-in suite") != std::string::npos);
}

TEST_CASE("a fetched model that is not on this machine skips its cases with the reason, and workloads and policies pick their models", "[e2e]") {
  const kvtest::TempDir temp("kvbench-e2e-fetched");
  const std::string dir = temp.path;
  fs::create_directory(dir + "/fetched");
  const std::string db = dir + "/results.sqlite";
  const std::string suite = dir + "/fetched.json";
  write_file(suite, R"({"name": "fetched", "repetitions": 1, "warmup": 0,
    "models": [{"name": "small", "backend": "llama", "path": "stories260K.bin", "tokenizer": "tok512.bin"},
               {"name": "big", "backend": "llama", "path": "stories15M.bin", "tokenizer": "tok32000.bin", "fetched": true}],
    "workloads": [{"name": "ppl", "kind": "perplexity", "context_tokens": 128, "windows": 1},
                  {"name": "ppl-small", "kind": "perplexity", "context_tokens": 64, "windows": 1, "models": ["small"]}],
    "policies": [{"name": "q8", "k": "q8", "v": "q8", "page_tokens": 16, "v_group": 16},
                 {"name": "q4", "k": "q4", "v": "q4", "page_tokens": 16, "v_group": 16, "models": ["big"]}]})");
  const kvtest::ScopedEnv fetched("KVBENCH_FETCHED_MODELS_DIR", dir + "/fetched");
  const Output out = run_kvbench("run --suite " + suite + " --models-dir " + std::string(KVBENCH_MODELS_DIR) + " --db " + db +
                                 " --json --heartbeat 0");
  INFO(out.text);
  // small: ppl/q8 and ppl-small/q8; big: ppl/q8 and ppl/q4, both skipped (the file is not in the fetched dir).
  CHECK(out.text.find("\"cases\":4") != std::string::npos);
  CHECK(out.text.find("\"skipped\":2") != std::string::npos);
  CHECK(sql_value(db, "SELECT count(*) FROM cases WHERE model = 'small' AND policy = 'q4'") == "0");
  CHECK(sql_value(db, "SELECT count(*) FROM cases WHERE model = 'big' AND workload = 'ppl-small'") == "0");
  CHECK(sql_value(db, "SELECT count(*) FROM cases WHERE model = 'big' AND status = 'skipped'") == "2");
  CHECK(sql_value(db, "SELECT skipped_reason FROM cases WHERE model = 'big' LIMIT 1") ==
        "stories15M.bin is in neither " + std::string(KVBENCH_MODELS_DIR) + " nor " + dir + "/fetched (models/fetch.sh fetches it)");
  // A name a workload or policy gives that the suite has no model of, and a V group that does not
  // divide a model's head, are refused before anything runs.
  const std::string bad = dir + "/bad.json";
  write_file(bad, R"({"name": "bad", "repetitions": 1, "warmup": 0,
    "models": [{"name": "small", "backend": "llama", "path": "stories260K.bin", "tokenizer": "tok512.bin"}],
    "workloads": [{"name": "ppl", "kind": "perplexity", "windows": 1, "models": ["tiny"]}],
    "policies": [{"name": "q8", "k": "q8", "v": "q8"}]})");
  Output refused = run_kvbench("run --suite " + bad + " --db " + dir + "/bad.sqlite");
  CHECK(refused.status == 2);
  CHECK(refused.text.find(bad + ": /workloads/0/models/0: 'tiny' is not a model of this suite") != std::string::npos);
  write_file(bad, R"({"name": "bad", "repetitions": 1, "warmup": 0,
    "models": [{"name": "syn", "backend": "synthetic", "preset": "qwen-0.5b-gqa"}],
    "workloads": [{"name": "rag", "kind": "rag", "context_tokens": 1024}],
    "policies": [{"name": "q8", "k": "q8", "v": "q8", "v_group": 48}]})");
  refused = run_kvbench("run --suite " + bad + " --db " + dir + "/bad.sqlite");
  INFO(refused.text);
  CHECK(refused.status == 2);
  CHECK(refused.text.find(bad + ": /policies/0/v_group: case syn/rag/q8/host: 48 does not divide head_dim 64 of model 'syn' "
                          "(V groups that do: 8, 16, 32, 64)") != std::string::npos);
  CHECK_FALSE(fs::exists(dir + "/bad.sqlite"));
}

TEST_CASE("a missing model is an error, not a skip, an impossible size is a skipped case", "[e2e]") {
  const kvtest::TempDir temp("kvbench-e2e-models");
  const std::string dir = temp.path;
  const std::string db = dir + "/results.sqlite";
  Output out = run_kvbench("run --suite accuracy --models-dir " + dir + "/nowhere --db " + db);
  INFO(out.text);
  CHECK(out.status == 2);
  CHECK(out.text.find("stories260K.bin") != std::string::npos);
  CHECK_FALSE(fs::exists(db));

  const std::string suite = dir + "/skip.json";
  write_file(suite, R"({"name": "skip", "repetitions": 1, "warmup": 0,
    "models": [{"name": "stories", "backend": "llama", "path": "stories260K.bin", "tokenizer": "tok512.bin"}],
    "workloads": [{"name": "rag-16k", "kind": "rag"}, {"name": "ppl", "kind": "perplexity", "windows": 1}],
    "policies": [{"name": "q8", "k": "q8", "v": "q8", "page_tokens": 16, "sparse": {"window": 64}}]})");
  out = run_kvbench("run --suite " + suite + " --models-dir " + std::string(KVBENCH_MODELS_DIR) + " --db " + db + " --json");
  INFO(out.text);
  CHECK(out.status == 0);
  CHECK(out.text.find("\"skipped\":1") != std::string::npos);
  CHECK(sql_value(db, "SELECT skipped_reason FROM cases WHERE workload = 'rag-16k'").find("needs 16416 positions; the model takes 512") !=
        std::string::npos);
  CHECK(sql_value(db, "SELECT status FROM cases WHERE workload = 'rag-16k'") == "skipped");
  // The perplexity case scores the real model: accuracy figures are finite, the exact-K/V ones NULL.
  CHECK(std::stod(sql_value(db, "SELECT value FROM metric_values WHERE workload = 'ppl' AND name = 'ppl'")) > 1.0);
  CHECK(sql_value(db, "SELECT value IS NULL FROM metric_values WHERE workload = 'ppl' AND name = 'attn_mass_recall'") == "1");
}
