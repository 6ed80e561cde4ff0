// A database with a damaged page the command must read (the root b-tree page of `runs`) is
// refused naming the file, exit 2, whatever the command - a reader or a writer - and the file's
// bytes stay as they were: never an internal error, never a run row in a damaged file.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "e2e/e2e_support.h"
#include "test_support.h"

namespace fs = std::filesystem;
using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;

TEST_CASE("a database with a damaged runs page is refused naming the file, and left as it was", "[e2e]") {
  const kvtest::TempDir dir("kvbench-e2e-damaged");
  const std::string db = dir.path + "/results.sqlite";
  fs::copy_file(std::string(KVBENCH_SOURCE_DIR) + "/tests/data/results-v6-events.sqlite", db);
  // A writer brings it to the current schema first: the damage is all there is to refuse.
  REQUIRE(run_kvbench("baseline set before 1 --db " + db).status == 0);
  const long page_size = std::stol(sql_value(db, "PRAGMA page_size"));
  const long root = std::stol(sql_value(db, "SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = 'runs'"));
  REQUIRE(root > 1);
  kvtest::sql(db, "PRAGMA wal_checkpoint(TRUNCATE)");  // every page in the main file
  REQUIRE((!fs::exists(db + "-wal") || fs::file_size(db + "-wal") == 0));
  {
    std::fstream file(db, std::ios::binary | std::ios::in | std::ios::out);
    file.seekp((root - 1) * page_size);
    const std::string garbage(static_cast<std::size_t>(page_size), '\xA5');
    file.write(garbage.data(), page_size);
    REQUIRE(file.good());
  }
  const std::string damaged = kvtest::read_file(db);
  const std::string suite = dir.path + "/one.json";
  kvtest::write_file(suite, R"({"name": "one", "models": [{"name": "m", "backend": "synthetic", "preset": "qwen-0.5b-gqa"}],
    "workloads": [{"name": "w", "kind": "rag", "context_tokens": 512, "gen_tokens": 2}], "policies": [{"name": "p"}]})");
  const std::vector<std::string> commands = {"list runs", "show 1", "compare --baseline 1 --candidate 2", "baseline set again 1",
                                             "run --suite " + suite, "prune --older-than 0"};
  for (const std::string& command : commands) {
    const Output out = run_kvbench(command + " --db " + db);
    INFO(command << ": " << out.text);
    CHECK(out.status == 2);
    CHECK(out.text.find(db + ": --db: damaged") != std::string::npos);
    CHECK(out.text.find("internal error") == std::string::npos);
    CHECK(kvtest::read_file(db) == damaged);
  }
}
