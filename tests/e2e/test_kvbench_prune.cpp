// End to end through the binary: `kvbench prune` on real runs. A dry run lists what would go
// and leaves the file as it was; a prune removes the old runs nothing holds with every row of
// theirs, keeps the baseline and the newest run, says how many bytes came back, and the gate
// still works on what stays; bad flags exit 2 naming the flag and the value.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "e2e/e2e_support.h"
#include "results_store.h"
#include "test_support.h"

using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::sql_value;

namespace {

void small_run_into(const std::string& db) {
  const Output out = run_kvbench("run --suite smoke --filter multimodal-1i/q4 --repetitions 1 --db " + db);
  INFO(out.text);
  REQUIRE(out.status == 0);
}

}  // namespace

TEST_CASE("kvbench prune --dry-run lists the old runs, prune removes them and reclaims the space", "[e2e][prune]") {
  const kvtest::TempDir temp("kvbench-e2e-prune");
  const std::string db = temp.path + "/results.sqlite";
  for (int i = 0; i < 4; ++i) small_run_into(db);
  {
    // Runs 1-3 started long ago; run 1 is the baseline.
    kvbench::ResultsStore store(db);
    REQUIRE(sqlite3_exec(store.db(), "UPDATE runs SET started_at = '2025-01-0' || id || 'T02:00:00Z' WHERE id <= 3", nullptr, nullptr, nullptr) ==
            SQLITE_OK);
  }
  REQUIRE(run_kvbench("baseline set nightly/main 1 --db " + db).status == 0);
  const std::string flags = " --older-than 30 --keep 1 --db " + db;

  const std::string before = kvtest::file_bytes(db);
  Output out = run_kvbench("prune --dry-run" + flags);
  INFO(out.text);
  CHECK(out.status == 0);
  CHECK(out.text.find("would remove 2 runs:\n  run     2  smoke            complete    2025-01-02T02:00:00Z\n"
                      "  run     3  smoke            complete    2025-01-03T02:00:00Z\n") != std::string::npos);
  CHECK(out.text.find("  run     1  smoke            complete    2025-01-01T02:00:00Z  kept: baseline nightly/main\n") != std::string::npos);
  CHECK(out.text.find("dry run: nothing changed") != std::string::npos);
  CHECK(kvtest::file_bytes(db) == before);
  CHECK(sql_value(db, "SELECT count(*) FROM runs") == "4");

  out = run_kvbench("prune" + flags);
  INFO(out.text);
  CHECK(out.status == 0);
  CHECK(out.text.find("removed 2 runs:\n  run     2  smoke") != std::string::npos);
  CHECK(out.text.find("rows removed: metrics ") != std::string::npos);
  CHECK(out.text.find(" reclaimed\n") != std::string::npos);
  CHECK(sql_value(db, "SELECT group_concat(id) FROM (SELECT id FROM runs ORDER BY id)") == "1,4");
  CHECK(sql_value(db, "SELECT count(*) FROM cases WHERE run_id NOT IN (SELECT id FROM runs)") == "0");
  for (const char* table : {"metrics", "series", "histograms", "events"}) {
    CAPTURE(table);
    CHECK(sql_value(db, std::string("SELECT count(*) FROM ") + table + " WHERE case_id NOT IN (SELECT id FROM cases)") == "0");
  }
  // The gate still reads what stays.
  CHECK(run_kvbench("compare --baseline nightly/main --candidate 4 --db " + db).status == 0);
  out = run_kvbench("prune" + flags);
  CHECK(out.status == 0);
  CHECK(out.text.find("nothing removed\n") != std::string::npos);
}

TEST_CASE("kvbench prune refuses bad flags, naming the flag and the value", "[e2e][prune][cli]") {
  const kvtest::TempDir temp("kvbench-e2e-prune-usage");
  const std::string db = temp.path + "/results.sqlite";
  struct Bad {
    std::string args, message;
  };
  const std::vector<Bad> cases = {
      {"prune --older-than -3 --db " + db, "kvbench: --older-than: -3: not a whole number of days, 0 or more"},
      {"prune --older-than=-3 --db " + db, "kvbench: --older-than: -3: not a whole number of days, 0 or more"},
      {"prune --older-than abc --db " + db, "kvbench: --older-than: abc: not a whole number of days, 0 or more"},
      {"prune --older-than 1.5 --db " + db, "kvbench: --older-than: 1.5: not a whole number of days, 0 or more"},
      {"prune --older-than 99999999999 --db " + db, "kvbench: --older-than: 99999999999: not a whole number of days"},
      {"prune --older-than 30 --keep -1 --db " + db, "kvbench: --keep: -1: not a whole number of runs, 0 or more"},
      {"prune --older-than 30 --keep many --db " + db, "kvbench: --keep: many: not a whole number of runs, 0 or more"},
      {"prune --db " + db, "kvbench: --older-than: required"},
      {"prune --older-than 30 --db " + db, "no such database"},
  };
  for (const Bad& bad : cases) {
    const Output out = run_kvbench(bad.args);
    INFO(bad.args << "\n" << out.text);
    CHECK(out.status == 2);
    CHECK(out.text.find(bad.message) != std::string::npos);
  }
}
