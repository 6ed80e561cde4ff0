// The summary fits the terminal it is printed on (a real pseudo-terminal of 80 and 200
// columns), stays 120 columns in a pipe, and is one table with --wide.
#include <catch2/catch.hpp>

#include <algorithm>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "e2e/e2e_support.h"
#include "test_support.h"

using kvtest::Output;

namespace {

std::size_t widest_line(const std::string& text) {
  std::size_t widest = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) widest = std::max(widest, line.size());
  return widest;
}

// The header line of a table block that holds both the first and the last default column.
bool one_block(const std::string& text) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.find("ttft") != std::string::npos && line.find("noise") != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("the summary fits the terminal: 80 and 200 columns on a pseudo-terminal, 120 in a pipe, --wide one table", "[e2e][whole-runs][cli]") {
  const kvtest::TempDir temp("kvbench-e2e-terminal");
  const std::string db = temp.path + "/results.sqlite";
  const Output made = kvtest::run_kvbench("run --suite smoke --filter 'rag-2k|multimodal|codebase-4k/q4' --repetitions 1 --db " + db);
  INFO(made.text);
  REQUIRE(made.status == 0);

  const Output narrow = kvtest::run_kvbench_tty("show 1 --db " + db, 80);
  INFO(narrow.text);
  REQUIRE(narrow.status == 0);
  CHECK(widest_line(narrow.text) <= 80);
  CHECK_FALSE(one_block(narrow.text));  // the columns go in blocks that fit
  CHECK(narrow.text.find("rag-2k/q4-hybrid-tight") != std::string::npos);

  const Output broad = kvtest::run_kvbench_tty("show 1 --db " + db, 200);
  INFO(broad.text);
  REQUIRE(broad.status == 0);
  CHECK(widest_line(broad.text) <= 200);
  CHECK(widest_line(broad.text) > 120);  // the names sit beside the figures
  CHECK(one_block(broad.text));
  // A case of several requests shows both TTFTs, each under its own name: the repository
  // prompt's and the questions' median; a case of one request has no follow-up.
  CHECK(broad.text.find("ttft ttft next") != std::string::npos);
  const std::regex two_ttfts(R"(\ncodebase-4k/q4-hybrid-tight +([0-9.]+ (ms|s|min))\*? +([0-9.]+ (ms|s|min))\*? )");
  std::smatch m;
  REQUIRE(std::regex_search(broad.text, m, two_ttfts));
  const std::regex one_ttft(R"(\nrag-2k/f16-full +[0-9.]+ (ms|s|min)\*? +- )");
  CHECK(std::regex_search(broad.text, one_ttft));

  const Output piped = kvtest::run_kvbench("show 1 --db " + db);
  CHECK(widest_line(piped.text) <= 120);

  const Output wide = kvtest::run_kvbench_tty("show 1 --wide --db " + db, 80);
  INFO(wide.text);
  CHECK(one_block(wide.text));
  CHECK(widest_line(wide.text) > 80);

  // run prints its summary the same way.
  const Output run = kvtest::run_kvbench_tty("run --suite smoke --filter multimodal --repetitions 1 --db " + db, 80);
  INFO(run.text);
  CHECK(run.status == 0);
  CHECK(widest_line(run.text.substr(run.text.find("run 2 [complete]"))) <= 80);
}
