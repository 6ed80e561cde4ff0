// The gate's JUnit: a failure per regression, undecided rows skipped one by one and failed once,
// in a test case of their own, when they fail the gate; every failure type documented.
#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "compare_command.h"
#include "comparison_record.h"
#include "run_comparison.h"
#include "test_support.h"

using namespace kvbench;

namespace {

MetricComparison junit_row(const std::string& metric, Verdict verdict) {
  MetricComparison m;
  m.metric = metric;
  m.verdict = verdict;
  m.baseline_median = 10.0;
  m.candidate_median = verdict == Verdict::Regressed ? 12.0 : 10.0;
  m.ratio = *m.candidate_median / *m.baseline_median;
  return m;
}

// A comparison of two cases with 2 regressions, 3 unreliable rows (1 of them judged by its
// CPU-time row), 1 inconclusive, an acknowledged regression and unchanged and ungated rows.
ComparisonRecord planted() {
  RunComparison c;
  c.baseline.id = 1;
  c.candidate.id = 2;
  c.baseline.suite = c.candidate.suite = "nightly";
  CaseComparison a, b;
  a.name = "m/rag/p/host";
  b.name = "m/codebase/p/host";
  MetricComparison judged = junit_row("decode_tps", Verdict::Unreliable);
  judged.judged_by = "span_decode_total_cpu_ms";
  judged.judged_verdict = Verdict::Unchanged;
  MetricComparison acked = junit_row("token_drop_ratio", Verdict::Regressed);
  acked.acknowledged = "ack 1: a deliberate trade";
  a.rows = {junit_row("attn_mass_recall", Verdict::Regressed), junit_row("tpot_ms_p50", Verdict::Unreliable), judged, acked,
            junit_row("kv_bytes_per_token", Verdict::Unchanged), junit_row("noise_cpu_share", Verdict::NotGated)};
  b.rows = {junit_row("span_decode_total_sim_instructions", Verdict::Regressed), junit_row("tpot_ms_p99", Verdict::Unreliable),
            junit_row("ttft_ms", Verdict::Inconclusive)};
  c.cases = {a, b};
  return comparison_record(c);
}

int count(const std::string& text, const std::string& what) {
  int n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("JUnit: a failure per regression, and one for the unreliable rows when they fail the gate", "[gate][junit]") {
  const ComparisonRecord c = planted();
  const std::string xml = comparison_junit(c, GateStrictness{false, true});
  INFO(xml);
  CHECK(count(xml, "<failure ") == 3);  // 2 regressions + the unreliable rows' one
  CHECK(count(xml, "type=\"regressed\"") == 2);
  CHECK(count(xml, "type=\"unreliable\"") == 1);
  CHECK(xml.find("<testsuites name=\"kvbench gate: run 2 against run 1\" tests=\"10\" failures=\"3\">") != std::string::npos);
  // The unreliable rows are skipped one by one and listed in the summary case's failure.
  const std::smatch summary = [&] {
    std::smatch m;
    std::regex_search(xml, m, std::regex(R"(<testcase classname="kvbench gate" name="unreliable rows" time="0">\s*<failure message="2 rows that noise or too few repetitions left undecided, with no CPU-time row that settled them" type="unreliable">([^<]*)</failure>)"));
    return m;
  }();
  REQUIRE(!summary.empty());
  CHECK(summary[1].str().find("m/rag/p/host tpot_ms_p50") != std::string::npos);
  CHECK(summary[1].str().find("m/codebase/p/host tpot_ms_p99") != std::string::npos);
  CHECK(xml.find("name=\"tpot_ms_p50\" time=\"0\">\n      <skipped message=\"unreliable") != std::string::npos);
  // The acknowledged regression and the inconclusive row are skipped; a row its CPU-time row
  // judged, an unchanged one, pass; a row not gated is no test case.
  CHECK(xml.find("name=\"token_drop_ratio\" time=\"0\">\n      <skipped message=\"regressed (acknowledged)") != std::string::npos);
  CHECK(xml.find("name=\"ttft_ms\" time=\"0\">\n      <skipped message=\"inconclusive") != std::string::npos);
  CHECK(xml.find("name=\"decode_tps\" time=\"0\"></testcase>") != std::string::npos);
  CHECK(xml.find("name=\"noise_cpu_share\"") == std::string::npos);
  CHECK(xml.find("<testcase classname=\"kvbench gate\" name=\"inconclusive rows\" time=\"0\">\n      <skipped message=\"1 row whose") !=
        std::string::npos);
}

TEST_CASE("JUnit: undecided rows passed by the gate fail nothing, inconclusive ones fail once under --inconclusive=fail, a new definition fails once",
          "[gate][junit]") {
  ComparisonRecord c = planted();
  std::string xml = comparison_junit(c, GateStrictness{false, false});
  CHECK(count(xml, "<failure ") == 2);
  CHECK(xml.find("(passed by --unreliable=pass)") != std::string::npos);
  xml = comparison_junit(c, GateStrictness{true, false});
  CHECK(count(xml, "<failure ") == 3);
  CHECK(count(xml, "type=\"inconclusive\"") == 1);
  c.definition_changed = std::pair{1, 2};
  xml = comparison_junit(c, GateStrictness{false, false});
  CHECK(count(xml, "type=\"needs-baseline\"") == 1);
  CHECK(xml.find("the benchmark definition changed v1 -&gt; v2") != std::string::npos);
}

TEST_CASE("A change the gate acts on is always visible: digits enough to tell the medians apart, and a change that is not zero", "[gate]") {
  RunComparison c;
  c.baseline.id = 1;
  c.candidate.id = 2;
  c.baseline.suite = c.candidate.suite = "s";
  CaseComparison k;
  k.name = "m/w/p/host";
  MetricComparison energy = junit_row("energy_mj_prefill", Verdict::Regressed);
  energy.baseline_median = 18700.00012;
  energy.candidate_median = 18700.00031;
  MetricComparison ttft = junit_row("ttft_ms@model", Verdict::Regressed);
  ttft.baseline_median = 174600.0;
  ttft.candidate_median = 174600.5;
  k.rows = {energy, ttft};
  c.cases = {k};
  const std::string table = comparison_table(comparison_record(c), false);
  INFO(table);
  CHECK(table.find("energy_mj_prefill: 18700.0001 mJ -> 18700.0003 mJ +0.0000010%") != std::string::npos);
  CHECK(table.find("ttft_ms@model: 174600.0 ms -> 174600.5 ms +0.00029%") != std::string::npos);
  const std::string md = comparison_markdown(comparison_record(c));
  CHECK(md.find("| 18700.0001 mJ | 18700.0003 mJ | +0.0000010% |") != std::string::npos);
}

TEST_CASE("the table's last line names the test that judged its host timings: Welch for two runs, paired for ab", "[gate]") {
  const ComparisonRecord record = planted();
  const std::string runs = comparison_table(record, false);
  const std::string ab = comparison_table(record, false, HostTimingTest::Paired);
  INFO(runs << "\n" << ab);
  CHECK(runs.find("(host timings: Welch on log values, Benjamini-Hochberg at FDR ") != std::string::npos);
  CHECK(runs.find("paired") == std::string::npos);
  CHECK(ab.find("(host timings: paired t-test on the per-pair log ratios, Benjamini-Hochberg at FDR ") != std::string::npos);
  CHECK(ab.find("Welch") == std::string::npos);
}
