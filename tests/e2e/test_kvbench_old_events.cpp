// A database written before events were typed (schema 6, tests/data/results-v6-events.sqlite:
// two degraded runs, L2 full and L2 out of space) reads the same through the new binary: `show`'s
// degradation lines and every part of the report the events feed (degradation lines, the L1 cap
// and pressure marks of the water-level plot, the dropped critical tokens) match what kvbench
// printed for it before (tests/data/results-v6-events.expected) - read-only as it is, converted
// on the fly, and again once a writer has migrated it, its events stored as fields.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/e2e_support.h"
#include "results_store.h"
#include "test_support.h"

namespace fs = std::filesystem;
using kvtest::Output;
using kvtest::run_kvbench;
using kvtest::read_file;
using kvtest::sql_value;
using kvtest::lines_of;

namespace {

// show: each "degraded <case>" line and the indented lines under it.
void degradation_block(const std::string& shown, std::vector<std::string>& out) {
  const std::vector<std::string> lines = lines_of(shown);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].rfind("degraded ", 0) != 0) continue;
    out.push_back(lines[i]);
    while (i + 1 < lines.size() && lines[i + 1].rfind("  ", 0) == 0) out.push_back(lines[++i]);
  }
}

// The report's lines that events feed.
void event_lines(const std::string& html, std::vector<std::string>& out) {
  static const std::regex token_row(R"(^<tr><td>-?\d+</td><td>\d+</td><td>\d+</td><td>\d+</td><td>[^<]*</td></tr>$)");
  for (const std::string& line : lines_of(html)) {
    if (line.find("class=\"degraded\">") != std::string::npos || line.rfind("<tr><td>L1 cap</td>", 0) == 0 ||
        line.rfind("<tr><td>mark: ", 0) == 0 || line.find("dropped critical tokens:") != std::string::npos ||
        std::regex_match(line, token_row)) {
      out.push_back(line);
    }
  }
}

std::vector<std::string> read_back(const std::string& db, const std::string& dir) {
  std::vector<std::string> out;
  for (int run : {1, 2}) {
    out.push_back("== run " + std::to_string(run) + ": show");
    const Output shown = run_kvbench("show --db " + db + " " + std::to_string(run));
    INFO(shown.text);
    REQUIRE(shown.status == 0);
    degradation_block(shown.text, out);
    out.push_back("== run " + std::to_string(run) + ": report");
    const std::string report = dir + "/report-" + std::to_string(run);
    const Output written = run_kvbench("report --db " + db + " --run " + std::to_string(run) + " --out " + report);
    INFO(written.text);
    REQUIRE(written.status == 0);
    event_lines(read_file(report + "/index.html"), out);
  }
  return out;
}

}  // namespace

TEST_CASE("a database from before typed events reads the same, as it is and once migrated", "[e2e][events]") {
  const kvtest::TempDir temp("kvbench-old-events");
  const std::string db = temp.path + "/results.sqlite";
  fs::copy_file(std::string(KVBENCH_SOURCE_DIR) + "/tests/data/results-v6-events.sqlite", db);
  const std::vector<std::string> expected = lines_of(read_file(std::string(KVBENCH_SOURCE_DIR) + "/tests/data/results-v6-events.expected"));
  REQUIRE(expected.size() > 100);
  const std::string events = sql_value(db, "SELECT count(*) FROM events");

  CHECK(read_back(db, temp.path) == expected);  // read-only: converted as it is read
  CHECK(sql_value(db, "PRAGMA user_version") == "6");

  { kvbench::ResultsStore migrate(db); }  // a writer migrates it
  CHECK(sql_value(db, "PRAGMA user_version") == std::to_string(kvbench::kSchemaVersion));
  CHECK(sql_value(db, "SELECT count(*) FROM events") == events);
  CHECK(sql_value(db, "SELECT count(*) FROM events WHERE data IS NULL OR json_valid(data) = 0") == "0");
  CHECK(sql_value(db, "SELECT json_extract(data, '$.to.fraction') FROM events WHERE kind = 'budget_change' ORDER BY rowid LIMIT 1") ==
        "0.125");
  CHECK(read_back(db, temp.path) == expected);
}
