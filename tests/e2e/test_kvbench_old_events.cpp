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

// The old kvbench drew a pressure mark per transition ("mark: safe-&gt;warning"), at most 12 a
// plot; the report now draws one per step with the states it went through, at most 12 steps.
// The golden file stays as that kvbench wrote it: each run of mark rows becomes one "<marks>"
// line in both sequences, and the marks are compared apart, step by step: the golden's steps
// (all but the last, which the old cap may have cut) lead the report's.
struct MarkBlocks {
  std::vector<std::string> lines;                      // the mark rows folded into "<marks>"
  std::vector<std::vector<std::string>> blocks;        // per run of mark rows: each step's label
  std::vector<bool> capped;                            // the old kvbench's 12 transitions reached
};

std::string step_label(const std::vector<std::string>& states) {
  if (states.size() > 3) return states.front() + " to " + states.back() + " (" + std::to_string(states.size() - 1) + " changes)";
  std::string label;
  for (const std::string& s : states) label += (label.empty() ? "" : " to ") + s;
  return label;
}

MarkBlocks fold_marks(const std::vector<std::string>& lines, bool old_marks) {
  static const std::regex transition(R"(^<tr><td>mark: (\w+)-&gt;(\w+)</td><td>(\d+)</td><td>-</td></tr>$)");
  static const std::regex step(R"(^<tr><td>mark: ([^<]+)</td><td>(\d+)</td><td>-</td></tr>$)");
  MarkBlocks out;
  bool in_block = false;
  std::vector<std::string> states;
  std::string at;
  int transitions = 0;
  const auto flush_step = [&] {
    if (!states.empty()) out.blocks.back().push_back(at + ": " + step_label(states));
    states.clear();
  };
  const auto close_block = [&] {
    if (!in_block) return;
    flush_step();
    out.capped.push_back(old_marks && transitions == 12);
    in_block = false;
  };
  for (const std::string& line : lines) {
    std::smatch m;
    if (line.rfind("<tr><td>mark: ", 0) != 0) {
      close_block();
      out.lines.push_back(line);
      continue;
    }
    if (!in_block) {
      in_block = true;
      transitions = 0;
      out.blocks.emplace_back();
      out.lines.push_back("<marks>");
    }
    if (old_marks && std::regex_match(line, m, transition)) {
      if (!states.empty() && m[3].str() != at) flush_step();
      if (states.empty()) states.push_back(m[1].str());
      at = m[3].str();
      states.push_back(m[2].str());
      ++transitions;
    } else if (!old_marks && std::regex_match(line, m, step)) {
      out.blocks.back().push_back(m[2].str() + ": " + m[1].str());
    } else {
      out.blocks.back().push_back("unreadable mark row: " + line);
    }
  }
  close_block();
  return out;
}

void check_same(const std::vector<std::string>& golden_lines, const std::vector<std::string>& read) {
  const MarkBlocks golden = fold_marks(golden_lines, true), now = fold_marks(read, false);
  CHECK(now.lines == golden.lines);
  REQUIRE(now.blocks.size() == golden.blocks.size());
  for (std::size_t b = 0; b < golden.blocks.size(); ++b) {
    std::vector<std::string> expected = golden.blocks[b];
    if (golden.capped[b]) expected.pop_back();
    INFO("mark block " << b);
    REQUIRE(now.blocks[b].size() >= expected.size());
    CHECK(std::vector<std::string>(now.blocks[b].begin(), now.blocks[b].begin() + static_cast<std::ptrdiff_t>(expected.size())) == expected);
    if (!golden.capped[b]) CHECK(now.blocks[b].size() == expected.size());
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

  check_same(expected, read_back(db, temp.path));  // read-only: converted as it is read
  CHECK(sql_value(db, "PRAGMA user_version") == "6");

  { kvbench::ResultsStore migrate(db); }  // a writer migrates it
  CHECK(sql_value(db, "PRAGMA user_version") == std::to_string(kvbench::kSchemaVersion));
  CHECK(sql_value(db, "SELECT count(*) FROM events") == events);
  CHECK(sql_value(db, "SELECT count(*) FROM events WHERE data IS NULL OR json_valid(data) = 0") == "0");
  CHECK(sql_value(db, "SELECT json_extract(data, '$.to.fraction') FROM events WHERE kind = 'budget_change' ORDER BY rowid LIMIT 1") ==
        "0.125");
  check_same(expected, read_back(db, temp.path));
}
