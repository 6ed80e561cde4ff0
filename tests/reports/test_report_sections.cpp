// Each report section rendered from a model built here (no store, no gnuplot): what it says
// with data and without, in the page's order of things.
#include <catch2/catch.hpp>

#include <string>

#include "html.h"
#include "report_model.h"
#include "report_sections.h"

using namespace kvbench;
using namespace kvbench::report;

namespace {

CaseView make_case(const std::string& policy, const std::string& soc, std::map<std::string, double> figures) {
  CaseView c;
  c.model = "m";
  c.workload = "w";
  c.policy = policy;
  c.soc = soc;
  c.name = "m/w/" + policy + "/" + soc;
  c.status = "complete";
  c.repetitions = 1;
  for (const auto& [name, value] : figures) c.figures[name] = {value, "", false, false};
  return c;
}

ReportModel base_model() {
  ReportModel m;
  m.record.id = 7;
  m.record.status = "complete";
  m.record.suite = "s";
  m.record.tags = {"night <1>"};
  m.record.config_json = "{}";
  m.record.meta_json = R"({"cpu_model": "cpu", "cores": 2})";
  m.suite = "s";
  m.host.id = m.model.id = 7;
  m.history = {7};
  return m;
}

// The HTML a section writes, plots left to their tables (no gnuplot).
template <class Section>
std::string rendered(Section section, const ReportModel& m) {
  Page page;
  section(page, m);
  return page.finish("/nonexistent/gnuplot", "", "").html;
}

}  // namespace

TEST_CASE("report sections: the verdict with and without a baseline", "[reports][sections]") {
  ReportModel m = base_model();
  CHECK(rendered(verdict_section, m).find("no baseline: nothing to compare run 7 with") != std::string::npos);
  ComparisonRecord c;
  c.baseline_run = 3;
  c.regressed = c.failing = 1;
  ComparisonRowRecord row;
  row.case_name = "m/w/p/host";
  row.metric = "decode_tps";
  row.verdict = Verdict::Regressed;
  row.ratio = 0.5;
  ComparisonRowRecord from_zero = row;
  from_zero.metric = "critical_miss_rate";
  from_zero.ratio.reset();
  from_zero.baseline_median = 0.0;
  from_zero.candidate_median = 0.2;
  c.rows = {row, from_zero};
  m.comparison = c;
  const std::string html = rendered(verdict_section, m);
  CHECK(html.find("regressed: run 7 against baseline run 3") != std::string::npos);
  CHECK(html.find("configuration: the same in both runs") != std::string::npos);
  CHECK(html.find("configuration: the same in both runs") != std::string::npos);
  // The rows have a section of their own, below the headline figures.
  const std::string rows = rendered(rows_section, m);
  CHECK(rows.find("<section id=\"rows\">") != std::string::npos);
  // The model and SoC every row shares said once; the link still names the whole case.
  CHECK(rows.find("<p>every case: model m, soc host</p>") != std::string::npos);
  CHECK(rows.find("<a href=\"#case-m-w-p-host\">w/<wbr/>p</a>") != std::string::npos);
  CHECK(rows.find("<td class=\"num\">-50.0%") != std::string::npos);
  // No interval: a deterministic change says so, with no p-value.
  CHECK(rows.find("<span class=\"ci\">exact</span>") != std::string::npos);
  CHECK(rows.find("<td class=\"num\">-</td><td class=\"verdict regressed\">regressed</td>") != std::string::npos);
  // A change from zero has no ratio and says so.
  CHECK(rows.find("<td class=\"num\">from 0</td>") != std::string::npos);
}

TEST_CASE("report sections: trends need two runs and draw each headline metric over them", "[reports][sections]") {
  ReportModel m = base_model();
  m.host.cases = {make_case("p", "host", {{"decode_tps", 10.0}})};
  CHECK(rendered(trends_section, m).find("no history: run 7 is the only complete run of suite s") != std::string::npos);
  RunView older = m.host;
  older.id = 5;
  older.cases[0].figures["decode_tps"] = {12.0, "", false, false};
  m.history = {5, 7};
  m.history_views = {{5, older}, {7, m.host}};
  m.baseline_run = 5;
  const std::string html = rendered(trends_section, m);
  CHECK(html.find("decode_tps over runs") != std::string::npos);
  CHECK(html.find("<td>mark: baseline</td><td>5</td>") != std::string::npos);
  CHECK(html.find("ttft_first_request_ms: no data") != std::string::npos);
}

TEST_CASE("report sections: a case's recordings, a priced case and a skipped one", "[reports][sections]") {
  ReportModel m = base_model();
  CaseView skipped = make_case("q", "host", {});
  skipped.status = "skipped";
  skipped.note = "too long";
  m.host.cases = {make_case("p", "host", {}), make_case("p", "phone", {}), skipped};
  CaseRecordings& r = m.recordings["m/w/p/host"];
  r.series["l1_used_bytes"] = {1048576.0, 2097152.0};
  r.shape.layer_scale = 4.0;
  r.shape.selects = false;
  const std::string html = rendered(cases_section, m);
  CHECK(html.find("id=\"case-m-w-p-host\"") != std::string::npos);
  CHECK(html.find("scaled from the executed layers to the whole model (4x)") != std::string::npos);
  CHECK(html.find("<td>l1_used_bytes</td><td>1</td><td>8</td>") != std::string::npos);  // 2 MiB x 4, in MiB
  CHECK(html.find("keeps pages by position only") != std::string::npos);
  CHECK(html.find("m/w/p/phone: priced from the host case&#39;s engine run") != std::string::npos);
  CHECK(html.find("m/w/q/host: skipped: too long") != std::string::npos);
}

TEST_CASE("report sections: the headline shows both TTFTs of a multi-request case, modelled ones on a SoC", "[reports][sections]") {
  ReportModel m = base_model();
  CaseView skipped = make_case("q", "host", {});
  skipped.status = "skipped";
  m.host.cases = {make_case("p", "host", {{"ttft_first_request_ms", 5004000.0}, {"ttft_followup_ms_p50", 5700.0}, {"decode_tps", 12.5}}),
                  make_case("r", "host", {{"ttft_first_request_ms", 850.0}, {"decode_tps", 30.0}}), make_case("p", "phone", {}), skipped};
  m.host.cases[0].figures["ttft_first_request_ms"].extrapolated = true;
  m.model.cases = {make_case("p", "phone", {{"ttft_first_request_ms", 90000.0}, {"ttft_followup_ms_p50", 120.0}})};
  const std::string html = rendered(headline_section, m);
  INFO(html);
  // The summary's names for the two TTFTs.
  CHECK(html.find("<th class=\"num\" title=\"ttft_first_request_ms\">ttft first request</th><th class=\"num\" title=\"ttft_followup_ms_p50\">"
                  "ttft next p50</th>") != std::string::npos);
  // 83.4 minutes for the prompt, 5.7 s for each question, not their mean.
  CHECK(html.find(">w/<wbr/>p/<wbr/>host</a></td><td>host</td><td class=\"num\">1.39 h*</td><td class=\"num\">5.70 s</td>") != std::string::npos);
  CHECK(html.find(">w/<wbr/>r/<wbr/>host</a></td><td>host</td><td class=\"num\">850 ms</td><td class=\"num\">-</td>") != std::string::npos);
  CHECK(html.find(">w/<wbr/>p/<wbr/>phone</a></td><td>model (phone)</td><td class=\"num\">1.50 min</td><td class=\"num\">120 ms</td>") !=
        std::string::npos);
  CHECK(html.find("w/q/host") == std::string::npos);           // skipped
  CHECK(html.find("title=\"ppl_delta_pct\"") == std::string::npos);  // no case has one
  CHECK(html.find("* extrapolated") != std::string::npos);
  m.host.cases.clear();
  CHECK(rendered(headline_section, m).find("no cases with figures") != std::string::npos);
}

TEST_CASE("report sections: across SoCs without the host, a negative headroom named", "[reports][sections]") {
  ReportModel m = base_model();
  CHECK(rendered(cross_soc_section, m).find("no sweep") != std::string::npos);
  m.model.cases = {make_case("p", "host", {{"ttft_first_request_ms", 3e7}}),
                   make_case("p", "phone", {{"ttft_first_request_ms", 900.0}, {"fits_in_memory", 0.0}, {"memory_headroom_bytes", -1073741824.0}})};
  const std::string html = rendered(cross_soc_section, m);
  CHECK(html.find("the host is left out of these charts") != std::string::npos);
  CHECK(html.find("does not fit (1): m/w/p on phone") != std::string::npos);
  CHECK(html.find("<th>phone (ms)</th>") != std::string::npos);
  CHECK(html.find("<td>m/w/p</td><td>-1</td>") != std::string::npos);  // the headroom in GiB, below zero
  CHECK(html.find("30000000") == std::string::npos);                    // the host's TTFT is nowhere
}

TEST_CASE("report sections: sparse quality, Pareto and metadata", "[reports][sections]") {
  ReportModel m = base_model();
  CHECK(rendered(sparse_section, m).find("no sparse-quality data") != std::string::npos);
  CHECK(rendered(pareto_section, m).find("no Pareto front") != std::string::npos);
  m.policy_budgets = {{"a", "hybrid 10%"}};
  m.host.cases = {make_case("a", "host", {{"kv_bytes_per_token", 40000.0}, {"attn_rel_error", 0.1}, {"attn_mass_recall", 0.9}, {"decode_tps", 20.0}}),
                  make_case("b", "host", {{"kv_bytes_per_token", 130000.0}, {"attn_rel_error", 0.001}, {"attn_mass_recall", 1.0}, {"decode_tps", 10.0}})};
  CHECK(rendered(sparse_section, m).find("<td>w/a (hybrid 10%)</td>") != std::string::npos);
  m.host.cases[0].figures["critical_miss_rate"] = {0.25, "", false, false};
  m.host.cases[0].figures["oracle_critical_miss_rate"] = {0.0625, "", false, false};
  const std::string sparse = rendered(sparse_section, m);
  CHECK(sparse.find("Critical tokens missed against the oracle") != std::string::npos);
  CHECK(sparse.find("0.0625") != std::string::npos);
  CHECK(sparse.find("Image attention-mass recall") == std::string::npos);  // no case with images
  m.host.cases[1].figures["visual_attn_mass_recall"] = {0.4375, "", false, false};
  m.host.cases[1].figures["visual_oracle_mass_recall"] = {0.96875, "", false, false};
  const std::string visual = rendered(sparse_section, m);
  CHECK(visual.find("Image attention-mass recall against the oracle") != std::string::npos);
  CHECK(visual.find("0.4375") != std::string::npos);
  CHECK(visual.find("0.96875") != std::string::npos);
  // Two phones: on one b does not fit (faded, off the front), on the other both fit and the
  // front is the host's, so it joins the host's plot.
  const auto on = [](CaseView c, const std::string& soc, double fits) {
    c.soc = soc;
    c.name = "m/w/" + c.policy + "/" + soc;
    c.figures["fits_in_memory"] = {fits, "", false, false};
    return c;
  };
  m.model.cases = {on(m.host.cases[0], "big-phone", 1.0), on(m.host.cases[1], "big-phone", 1.0), on(m.host.cases[0], "small-phone", 1.0),
                   on(m.host.cases[1], "small-phone", 0.0)};
  m.host.cases.push_back(on(m.host.cases[0], "big-phone", 1.0));
  m.host.cases.push_back(on(m.host.cases[1], "big-phone", 1.0));
  m.host.cases.push_back(on(m.host.cases[0], "small-phone", 1.0));
  m.host.cases.push_back(on(m.host.cases[1], "small-phone", 0.0));
  const std::string fronts = rendered(pareto_section, m);
  INFO(fronts);
  CHECK(fronts.find("Pareto front: m / w / host, big-phone") != std::string::npos);
  CHECK(fronts.find("Pareto front: m / w / small-phone") != std::string::npos);
  CHECK(fronts.find("<td>b (10 tok/s) does not fit</td><td>126.953</td><td>0.001</td><td>no</td>") != std::string::npos);
  CHECK(fronts.find("kv_bytes_per_token (KiB)") != std::string::npos);
  const std::string meta = rendered(metadata_section, m);
  CHECK(meta.find("<td>night &lt;1&gt;</td>") != std::string::npos);
  CHECK(meta.find("<td>cpu, 2 cores</td>") != std::string::npos);
}
