// End to end through the binary: a suite run as shards (`run --shard I/N --run-group ID`) and
// merged (`merge --into`) is the suite's run - the same cases in the same order with
// bit-identical exact and modelled figures, every row of theirs copied, and where each case ran
// kept. Merges that would not make one run are refused with exit 2 and write nothing.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "e2e/e2e_support.h"
#include "results_store.h"
#include "test_support.h"

using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;
using kvtest::sql;

namespace {

void run_ok(const std::string& args) {
  const Output out = run_kvbench(args);
  INFO(args << "\n" << out.text);
  REQUIRE(out.status == 0);
}

// Every exact and modelled figure of a run, as stored (values quoted exactly), in case order.
std::vector<std::vector<std::string>> figures(const std::string& db, const std::string& run) {
  return sql(db, "SELECT c.name, m.repetition, m.name, m.clock, quote(m.value), m.na_reason FROM metrics m JOIN cases c ON c.id = m.case_id"
                 " WHERE c.run_id = " + run + " AND m.clock IN ('exact', 'model') ORDER BY c.id, m.repetition, m.name, m.clock");
}

std::string rows(const std::string& db, const std::string& table, const std::string& run) {
  return sql_value(db, "SELECT count(*) FROM " + table + " t JOIN cases c ON c.id = t.case_id WHERE c.run_id = " + run);
}

}  // namespace

TEST_CASE("three merged shards of smoke are the unsharded run: cases, order, exact and modelled figures", "[e2e][merge][whole-runs]") {
  const kvtest::TempDir temp("kvbench-e2e-merge");
  const std::string whole = temp.path + "/whole.sqlite", merged = temp.path + "/merged.sqlite";
  run_ok("run --suite smoke --repetitions 1 --db " + whole);
  std::string shards;
  for (int i = 1; i <= 3; ++i) {
    const std::string db = temp.path + "/shard" + std::to_string(i) + ".sqlite";
    run_ok("run --suite smoke --repetitions 1 --shard " + std::to_string(i) + "/3 --run-group night-1 --db " + db);
    CHECK(sql_value(db, "SELECT json_extract(meta_json, '$.shard.index') || '/' || json_extract(meta_json, '$.shard.count') FROM runs") ==
          std::to_string(i) + "/3");
    CHECK(sql_value(db, "SELECT tags FROM runs") == "run-group=night-1");
    shards += " " + db;
  }
  const Output out = run_kvbench("merge --into " + merged + shards);
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK(out.text.find("merged run group night-1: 3 of 3 shards, 8 cases, into run 1 of") != std::string::npos);

  CHECK(sql(merged, "SELECT name FROM cases ORDER BY id") == sql(whole, "SELECT name FROM cases ORDER BY id"));
  const auto expected = figures(whole, "1");
  REQUIRE(expected.size() > 100);
  CHECK(figures(merged, "1") == expected);
  CHECK(sql_value(merged, "SELECT config_hash FROM runs") == sql_value(whole, "SELECT config_hash FROM runs"));
  CHECK(sql_value(merged, "SELECT status || ' ' || tags FROM runs") == "complete run-group=night-1,merged");
  CHECK(sql_value(merged, "SELECT json_array_length(meta_json, '$.merged.shards') FROM runs") == "3");
  CHECK(sql_value(merged, "SELECT json_extract(meta_json, '$.merged.partial') FROM runs") == "0");
  CHECK(sql_value(merged, "SELECT json_type(meta_json, '$.shard') FROM runs") == "NULL");
  // Every row of every case came across.
  for (const char* table : {"metrics", "series", "histograms", "events"}) {
    INFO(table);
    std::size_t sum = 0;
    for (int i = 1; i <= 3; ++i) sum += std::stoul(rows(temp.path + "/shard" + std::to_string(i) + ".sqlite", table, "1"));
    CHECK(rows(merged, table, "1") == std::to_string(sum));
  }
  // A merged run reads like any other.
  const Output shown = run_kvbench("show latest --db " + merged);
  INFO(shown.text);
  CHECK(shown.status == 0);
  // Merging the same group again is refused.
  const Output again = run_kvbench("merge --into " + merged + shards);
  CHECK(again.status == 2);
  CHECK(again.text.find("already holds run 1, merged from run group night-1") != std::string::npos);
  CHECK(sql_value(merged, "SELECT count(*) FROM runs") == "1");
}

TEST_CASE("merges that would not make one run are refused with exit 2, and nothing is written", "[e2e][merge]") {
  const kvtest::TempDir temp("kvbench-e2e-merge-refused");
  const std::string small = "run --suite smoke --filter multimodal-1i --repetitions 1 --run-group g ";
  const std::string one = temp.path + "/one.sqlite", two = temp.path + "/two.sqlite", copy = temp.path + "/copy.sqlite";
  run_ok(small + "--shard 1/2 --db " + one);
  run_ok(small + "--shard 2/2 --db " + two);
  std::filesystem::copy_file(one, copy);
  const std::string into = temp.path + "/into.sqlite";
  const auto refused = [&](const std::string& args, const std::string& says) {
    const Output out = run_kvbench("merge --into " + into + " " + args);
    INFO(args << "\n" << out.text);
    CHECK(out.status == 2);
    CHECK(out.text.find(says) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(into));
  };
  refused(one, "shard 2 of 2 of run group g is missing");
  refused(one + " " + copy, "is the same shard as run 1 of");
  refused(one + " " + one, "given twice");
  refused(one + " " + two + " --run-group other", "holds no shard run of run group other");
  refused(temp.path + "/absent.sqlite", "absent.sqlite: SHARD: does not exist");
  // A shard of another suite under the same group name.
  const std::string other_suite = temp.path + "/other.json", other = temp.path + "/other.sqlite";
  kvtest::write_file(other_suite, R"({"name": "other", "repetitions": 1, "warmup": 0,
    "models": [{"name": "syn-7b", "backend": "synthetic", "preset": "llama-7b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "rag-1k", "kind": "rag", "context_tokens": 1024, "gen_tokens": 4}],
    "policies": [{"name": "f16", "k": "f16", "v": "f16"}, {"name": "q4", "k": "q4", "v": "q4"}]})");
  run_ok("run --suite " + other_suite + " --shard 2/2 --run-group g --db " + other);
  refused(one + " " + other, "other.sqlite: suite: run 1 of");

  // A shard that did not finish, and a partial merge that says so.
  const std::string broken = temp.path + "/broken.sqlite";
  std::filesystem::copy_file(two, broken);
  {
    kvbench::ResultsStore store(broken);
    REQUIRE(sqlite3_exec(store.db(), "UPDATE runs SET status = 'failed'", nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  refused(one + " " + broken, "is failed, not complete");
  const Output partial = run_kvbench("merge --allow-partial --into " + into + " " + one + " " + broken);
  INFO(partial.text);
  CHECK(partial.status == 0);
  CHECK(sql_value(into, "SELECT status || ' ' || tags FROM runs") == "failed run-group=g,merged,partial");
  CHECK(sql_value(into, "SELECT json_extract(meta_json, '$.merged.partial') FROM runs") == "1");

  // A shard run again into its database replaces the earlier attempt.
  run_ok(small + "--shard 1/2 --db " + one);
  const std::string again = temp.path + "/again.sqlite";
  const Output merged = run_kvbench("merge --into " + again + " " + one + " " + two);
  INFO(merged.text);
  CHECK(merged.status == 0);
  CHECK(sql_value(again, "SELECT json_extract(meta_json, '$.merged.shards[0].run_id') FROM runs") == "2");
  // A file that is no kvbench database is named as the SHARD it was given as.
  const std::string junk = temp.path + "/junk.sqlite";
  kvtest::write_file(junk, std::string(4096, 'x'));  // not a database
  const Output bad = run_kvbench("merge --into " + temp.path + "/never.sqlite " + junk);
  CHECK(bad.status == 2);
  CHECK(bad.text.find("junk.sqlite: SHARD: ") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(temp.path + "/never.sqlite"));
}

TEST_CASE("shard flags are checked before any work", "[e2e][merge]") {
  const kvtest::TempDir temp("kvbench-e2e-shard-flags");
  const std::string db = temp.path + "/r.sqlite";
  const auto refused = [&](const std::string& args, const std::string& says) {
    const Output out = run_kvbench("run --suite smoke --db " + db + " " + args);
    INFO(args << "\n" << out.text);
    CHECK(out.status == 2);
    CHECK(out.text.find(says) != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(db));
  };
  refused("--shard 0/3 --run-group g", "--shard: 0/3: INDEX must be 1 to 3");
  refused("--shard 1of3 --run-group g", "not INDEX/COUNT");
  refused("--shard 1/3", "a shard run needs --run-group ID");
  refused("--run-group g", "give --shard I/N with it");
  refused("--shard 1/3 --run-group 'a b'", "at most 64 letters");
  refused("--shard 1/3 --run-group g --balance-from " + temp.path + "/none.sqlite", "none.sqlite: --balance-from: does not exist");
}
