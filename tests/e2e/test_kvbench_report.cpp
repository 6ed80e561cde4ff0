// End to end through the binary: two smoke runs, a gate between them, then `kvbench report`:
// the page is one well-formed document with every section, every SVG in it is well-formed and
// nothing references the network; the banner follows the stored verdict; bad input exits 2
// and writes nothing.
#include <catch2/catch.hpp>

#include <filesystem>
#include <string>

#include "e2e/e2e_support.h"
#include "html.h"
#include "test_support.h"

using kvtest::Output;
using kvtest::run_kvbench;

TEST_CASE("kvbench report writes one self-contained, well-formed page of the gated run", "[e2e][whole-runs][report]") {
  const kvtest::TempDir dir("kvbench-e2e-report");
  const std::string db = dir.path + "/results.sqlite", out_dir = dir.path + "/report";
  for (int run = 1; run <= 2; ++run) REQUIRE(run_kvbench("run --suite smoke --db " + db + " --json").status == 0);
  // Only the deterministic rows are gated: the page is under test, not this machine's timings
  // beside CTest's other tests.
  const std::string rules = dir.path + "/exact-only.json";
  kvtest::write_file(rules, R"({"rules": [
    {"metric": "*_ms", "gated": false}, {"metric": "*_ms_*", "gated": false}, {"metric": "*_tps", "gated": false},
    {"metric": "*_instructions", "gated": false}, {"metric": "goodput", "gated": false},
    {"metric": "swap_*_gb_per_s", "gated": false}, {"metric": "peak_rss_bytes", "gated": false}]})");
  const Output gate = run_kvbench("gate --baseline 1 --candidate 2 --rules " + rules + " --db " + db);
  INFO(gate.text);
  REQUIRE(gate.status == 0);
  Output out = run_kvbench("report --db " + db + " --out " + out_dir);
  INFO(out.text);
  REQUIRE(out.status == 0);
  CHECK(out.text.find("report of run 2 written to " + out_dir + "/index.html") != std::string::npos);
  const std::string html = kvtest::file_bytes(out_dir + "/index.html");
  CHECK(kvbench::report::well_formed_xml(html));  // stricter than an HTML parser
  for (const char* id : {"verdict", "trends", "cases", "sparse-quality", "pareto", "cross-soc", "metadata"}) {
    INFO(id);
    CHECK(html.find(std::string("<section id=\"") + id + "\">") != std::string::npos);
  }
  int svgs = 0;
  for (std::size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) {
    const std::size_t end = html.find("</svg>", at);
    REQUIRE(end != std::string::npos);
    CHECK(kvbench::report::well_formed_xml(html.substr(at, end + 6 - at)));
    ++svgs;
  }
  CHECK(svgs > 20);
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
  CHECK(html.find("the gate&#39;s stored verdict 1") != std::string::npos);
  CHECK(html.find("against baseline run 1") != std::string::npos);
  CHECK(html.find("no sweep: the run priced no SoC beside the host") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(out_dir + "/.index.html.partial"));

  // An explicit baseline is compared afresh; the run named is reported.
  out = run_kvbench("report --db " + db + " --run 1 --baseline 2 --out " + out_dir);
  REQUIRE(out.status == 0);
  CHECK(kvtest::file_bytes(out_dir + "/index.html").find("compared now with the built-in gate rules (--baseline 2)") != std::string::npos);

  // Bad input: exit 2, and the page already there stays as it was.
  const std::string before = kvtest::file_bytes(out_dir + "/index.html");
  out = run_kvbench("report --db " + db + " --run 99 --out " + out_dir);
  CHECK(out.status == 2);
  CHECK(out.text.find("99") != std::string::npos);
  kvtest::write_file(dir.path + "/a-file", "x");
  out = run_kvbench("report --db " + db + " --out " + dir.path + "/a-file");
  CHECK(out.status == 2);
  CHECK(out.text.find("--out") != std::string::npos);
  out = run_kvbench("report --db " + dir.path + "/missing.sqlite --out " + out_dir);
  CHECK(out.status == 2);
  out = run_kvbench("report --db " + db);
  CHECK(out.status == 2);  // --out is required
  CHECK(kvtest::file_bytes(out_dir + "/index.html") == before);
}
