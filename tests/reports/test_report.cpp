// The report page from a real run: every section present (one line when it has no data), the
// page well-formed, hostile names from the suite, the tags and the gate's rows escaped in every
// section, and without gnuplot every plot left to its table under one note.
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "html.h"
#include "report.h"
#include "results_store.h"
#include "runner.h"
#include "suite_config.h"
#include "test_support.h"

using namespace kvbench;

namespace {

// No "/" in it: names cannot hold one (it joins a case name's parts).
const char* const kHostile = "<script>alert(1)<script>";

// Two policies (a front needs two points) with hostile names, and a hostile tag.
std::string hostile_suite() {
  return R"({"name": "s\"<b>", "seed": 1, "repetitions": 1, "warmup": 0,
    "models": [{"name": "m<i>'", "backend": "synthetic", "preset": "qwen-0.5b-gqa", "sample_layers": 1}],
    "workloads": [{"name": "w&amp;<u>", "kind": "rag", "context_tokens": 1024, "gen_tokens": 8}],
    "policies": [{"name": "<script>alert(1)<script>", "k": "q4", "v": "q4", "residual_tokens": 64,
                  "sparse": {"selector": "hybrid", "window": 64, "budget": 0.25, "sample_every": 2}},
                 {"name": "f16 \"full\"", "k": "f16", "v": "f16", "sparse": {"selector": "full", "sample_every": 2}}],
    "socs": ["host", "apple-m3"]})";
}

std::string make_db(const kvtest::TempDir& dir) {
  const SuiteConfig suite = parse_suite(hostile_suite(), "hostile.json", dir.path);
  RunOptions options;
  options.db_path = dir.path + "/results.sqlite";
  options.progress = false;
  options.tags = {"tag \"quoted\" & <b>bold</b>"};
  REQUIRE(run_suite(suite, options).status == RunStatus::Complete);
  return options.db_path;
}

// A gate comparison whose rows carry hostile case names and reasons.
std::string hostile_comparison() {
  return R"({"baseline_run": 1, "candidate_run": 1, "failing": 1, "regressed": 2, "improved": 0, "inconclusive": 0,
    "rows": [{"case": "<script>alert(1)<script>", "metric": "decode_tps", "baseline_median": 10.0, "candidate_median": 5.0,
              "ratio": 0.5, "ratio_low": 0.4, "ratio_high": 0.6, "adjusted_p": 0.001, "verdict": "regressed", "acknowledged": ""},
             {"case": "m/w/p/host", "metric": "tpot_ms_p50", "baseline_median": 1.0, "candidate_median": 2.0, "ratio": 2.0,
              "verdict": "regressed", "acknowledged": "<img src=x onerror=alert(1)>"}]})";
}

// The page of run 1 in `db`, compared as `comparison` (JSON) says.
report::ReportOutcome report_of(const std::string& db, const std::string& comparison, const std::string& note = "") {
  ResultsStore store(db, Access::ReadOnly);
  report::ReportOptions options;
  options.run_id = 1;
  options.comparison = parse_comparison_record(comparison, "test");
  options.baseline_note = note;
  return report::build_report(store, options);
}

const char* const kSections[] = {"verdict", "trends", "cases", "sparse-quality", "pareto", "cross-soc", "metadata"};

}  // namespace

TEST_CASE("report: every section, escaped, a well-formed page", "[reports][report]") {
  const kvtest::TempDir dir("kvbench-report");
  const report::ReportOutcome page = report_of(make_db(dir), hostile_comparison(), "a note with <b>markup</b>");
  const std::string& html = page.html;
  CHECK(report::well_formed_xml(html));
  for (const char* id : kSections) {
    INFO(id);
    CHECK(html.find(std::string("<section id=\"") + id + "\">") != std::string::npos);
  }
  std::size_t pos = 0;
  for (const char* id : kSections) {
    const std::size_t at = html.find(std::string("<section id=\"") + id + "\">");
    CHECK(at >= pos);  // in the issue's order
    pos = at;
  }
  // Nothing hostile reaches the page as markup; it is all there as text.
  CHECK(html.find(kHostile) == std::string::npos);
  CHECK(html.find("<img") == std::string::npos);
  CHECK(html.find("<b>") == std::string::npos);
  CHECK(html.find("<i>") == std::string::npos);
  CHECK(html.find("<u>") == std::string::npos);
  const std::string escaped = report::escape_html(kHostile);
  CHECK(html.find(escaped) != std::string::npos);
  CHECK(html.find("&lt;img src=x onerror=alert(1)&gt;") != std::string::npos);  // the acknowledgement (verdict)
  CHECK(html.find("tag &quot;quoted&quot; &amp; &lt;b&gt;bold&lt;/b&gt;") != std::string::npos);  // metadata
  CHECK(html.find("m&lt;i&gt;&#39;/w&amp;amp;&lt;u&gt;/" + escaped) != std::string::npos);   // case sections
  const std::regex scripts("<script");
  CHECK(std::distance(std::sregex_iterator(html.begin(), html.end(), scripts), std::sregex_iterator()) == 1);  // ours
  // The banner says what the comparison says, regressed rows first.
  CHECK(html.find("<p class=\"banner regressed\">regressed: run 1 against baseline run 1; 2 regressed (1 acknowledged)") != std::string::npos);
  // Plots drawn and inlined; the two SoCs compared; the Pareto front of each SoC drawn.
  CHECK(page.plots > 10);
  CHECK(page.drawn == page.plots);
  CHECK(html.find("per SoC (model clock)") != std::string::npos);
  // The SoCs with the same front share one plot.
  CHECK(std::regex_search(html, std::regex("Pareto front: m&lt;i&gt;&#39; / w&amp;amp;&lt;u&gt; / [^<]*apple-m3")));
  // One run of the suite: the trends section says so in one line.
  CHECK(html.find("no history: run 1 is the only complete run of suite") != std::string::npos);
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
  // Per case: water levels in whole-model bytes (qwen-0.5b: 24 layers, 1 executed), prefill and
  // decode time apart, selection plots only for the policy that selects.
  CHECK(html.find("scaled from the executed layers to the whole model (24x)") != std::string::npos);
  CHECK(html.find("Prefill time by span") != std::string::npos);
  CHECK(html.find("Decode time by span") != std::string::npos);
  CHECK(html.find("Time breakdown") == std::string::npos);
  const auto full = html.find("f16 &quot;full&quot;/host <span");
  REQUIRE(full != std::string::npos);
  const auto next = html.find("<details class=\"case\"", full);
  const auto full_end = next != std::string::npos ? next : html.find("</section>", full);
  const std::string full_case = html.substr(full, full_end - full);
  CHECK(full_case.find("keeps pages by position only") != std::string::npos);
  CHECK(full_case.find("Keep ratio") == std::string::npos);
  CHECK(full_case.find("Importance scores") == std::string::npos);
  CHECK(html.find("Keep ratio") != std::string::npos);  // the hybrid policy's case has it
}

TEST_CASE("report: without a baseline the banner says so", "[reports][report]") {
  const kvtest::TempDir dir("kvbench-report-none");
  const std::string db = make_db(dir);
  ResultsStore store(db, Access::ReadOnly);
  report::ReportOptions options;
  options.run_id = 1;
  const std::string html = report::build_report(store, options).html;
  CHECK(html.find("<p class=\"banner none\">no baseline") != std::string::npos);
}

TEST_CASE("report: without gnuplot every plot is its table, under one note", "[reports][report]") {
  const kvtest::TempDir dir("kvbench-report-nognuplot");
  const std::string db = make_db(dir);
  ResultsStore store(db, Access::ReadOnly);
  report::ReportOptions options;
  options.run_id = 1;
  report::ReportOutcome page;
  {
    const kvtest::ScopedEnv path("PATH", "/nonexistent-kvbench-dir");
    page = report::build_report(store, options);
  }
  CHECK(page.drawn == 0);
  CHECK(page.plot_note == "plots unavailable: gnuplot not found");
  CHECK(page.html.find("<svg") == std::string::npos);
  const std::regex note("plots unavailable: gnuplot not found");
  CHECK(std::distance(std::sregex_iterator(page.html.begin(), page.html.end(), note), std::sregex_iterator()) == 1);
  const std::regex open_tables("<details class=\"data\" open=\"open\">");
  CHECK(std::distance(std::sregex_iterator(page.html.begin(), page.html.end(), open_tables), std::sregex_iterator()) == page.plots);
  CHECK(report::well_formed_xml(page.html));
}

TEST_CASE("report: the verdict starts with what changed, and each row links to its case", "[reports][report]") {
  const kvtest::TempDir dir("kvbench-report-changes");
  const std::string html = report_of(make_db(dir), R"({"baseline_run": 1, "candidate_run": 1, "failing": 1, "regressed": 1,
    "caveats": ["the machine changed"],
    "cases": [{"case": "a/w/p/host", "config_changes": ["policies.sparse.budget: 0.25 -> 0.1"]},
              {"case": "b/w/p/host", "config_changes": ["policies.sparse.budget: 0.25 -> 0.1"]},
              {"case": "c/w/p/host", "config_changes": ["models.weights: \"f16\" -> \"q4\""]}],
    "rows": [{"case": "m<i>'/w&amp;<u>/f16 \"full\"/host", "metric": "decode_tps", "baseline_median": 10.0, "candidate_median": 5.0,
              "ratio": 0.5, "ratio_low": 0.4, "ratio_high": 0.6, "adjusted_p": 0.001, "verdict": "regressed"}]})")
                                 .html;
  CHECK(report::well_formed_xml(html));
  const auto changes = html.find("<strong>What changed</strong>");
  REQUIRE(changes != std::string::npos);
  CHECK(changes < html.find("<table class=\"rows verdict-rows\">"));  // before the rows
  CHECK(html.find("<section id=\"headline\">") < html.find("<section id=\"rows\">"));  // the headline figures on the first screen
  CHECK(html.find("<li>policies.sparse.budget: 0.25 -&gt; 0.1 (2 cases)</li>") != std::string::npos);
  CHECK(html.find("<li>models.weights: &quot;f16&quot; -&gt; &quot;q4&quot; (case c/w/p/host)</li>") != std::string::npos);
  CHECK(html.find("<li>caveat: the machine changed</li>") != std::string::npos);
  // The regressed row's case is a link to that case's part of the page, which carries the id.
  // (its model and SoC, the same on every row, said once above the rows)
  CHECK(html.find("<p>every case: model m&lt;i&gt;&#39;, soc host</p>") != std::string::npos);
  const std::regex link("<a href=\"#(case-[A-Za-z0-9-]+)\">w&amp;amp;&lt;u&gt;");
  std::smatch m;
  REQUIRE(std::regex_search(html, m, link));
  CHECK(html.find("id=\"" + m[1].str() + "\"") != std::string::npos);
  CHECK(html.find("<div class=\"scroll\"><table class=\"rows verdict-rows\">") != std::string::npos);  // never wider than the page
}
