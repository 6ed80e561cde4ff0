#include "report_sections.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "metric_table.h"

namespace kvbench::report {

void verdict_section(Page& page, const ReportModel& m) {
  const RunView& run = m.host;
  page << section_open("verdict", "Verdict");
  std::vector<const CaseView*> degraded;
  for (const CaseView& c : run.cases) {
    if (!c.degradation.empty()) degraded.push_back(&c);
  }
  if (!m.comparison) {
    page << "<p class=\"banner none\">no baseline: nothing to compare run " + std::to_string(run.id) +
                " with (gate it, or pass <code>--baseline</code>)</p>\n";
  } else {
    const ComparisonRecord& c = *m.comparison;
    std::string state = c.failing > 0 ? "regressed" : c.unreliable > 0 ? "unreliable" : c.inconclusive > 0 ? "inconclusive" : "pass";
    std::string label = state;
    // Across benchmark definitions the exact and modelled rows were not gated: the gate asks for a baseline.
    if (c.definition_changed) {
      state = "inconclusive";
      label = fmt::format("needs a baseline (benchmark definition changed v{} -> v{})", c.definition_changed->first,
                          c.definition_changed->second);
    }
    page << fmt::format("<p class=\"banner {}\">{}: run {} against baseline run {}; {} regressed ({} acknowledged), {} unreliable, {} "
                        "improved, {} inconclusive</p>\n",
                        state, h(label), run.id, c.baseline_run, c.regressed, c.regressed - c.failing, c.unreliable, c.improved,
                        c.inconclusive);
    page << "<p>" + h(m.baseline_note) + "</p>\n";
    // What changed between the two runs comes first: it is often the why of every row below.
    {
      std::vector<std::string> changed;
      if (c.definition_changed) {
        changed.push_back(fmt::format("the benchmark definition: v{} -> v{} (exact and modelled figures are not compared across it)",
                                      c.definition_changed->first, c.definition_changed->second));
      }
      // Cases with the same configuration changes are said once.
      std::map<std::vector<std::string>, std::vector<std::string>> by_changes;
      for (const ComparisonCaseRecord& k : c.cases) {
        if (!k.config_changes.empty()) by_changes[k.config_changes].push_back(k.name);
      }
      for (const auto& [changes, names] : by_changes) {
        std::string list;
        for (const std::string& change : changes) list += (list.empty() ? "" : "; ") + change;
        changed.push_back(list + (names.size() == 1 ? " (case " + names.front() + ")" : fmt::format(" ({} cases)", names.size())));
      }
      for (const ComparisonCaseRecord& k : c.cases) {
        if (!k.not_comparable.empty()) changed.push_back("case " + k.name + " not compared: " + k.not_comparable);
      }
      if (!c.only_in_baseline.empty()) changed.push_back(fmt::format("{} cases only in the baseline", c.only_in_baseline.size()));
      if (!c.only_in_candidate.empty()) changed.push_back(fmt::format("{} cases only in the candidate", c.only_in_candidate.size()));
      for (const std::string& caveat : c.caveats) changed.push_back("caveat: " + caveat);
      if (changed.empty()) {
        page << line("configuration: the same in both runs");
      } else {
        page << "<div class=\"changes\"><strong>What changed</strong>\n<ul>\n";
        for (const std::string& item : changed) page << "<li>" + h(item) + "</li>\n";
        page << "</ul></div>\n";
      }
    }
  }
  if (degraded.empty()) {
    page << line("no case degraded");
  } else {
    page << "<ul class=\"degraded\">\n";
    for (const CaseView* c : degraded) {
      std::string lines;
      for (const std::string& l : c->degradation) lines += (lines.empty() ? "" : "; ") + l;
      page << "<li><strong>degraded " + h(c->name) + "</strong> (in " + std::to_string(c->degraded_repetitions) + " of " +
                  std::to_string(c->repetitions) + " repetitions): " + h(lines) + "</li>\n";
    }
    page << "</ul>\n";
  }
  page << "</section>\n";
}


void rows_section(Page& page, const ReportModel& m) {
  if (!m.comparison) return;
  const ComparisonRecord& c = *m.comparison;
  page << section_open("rows", "Rows that moved");
  // A record from an older kvbench may hold its rows in another order.
  std::vector<ComparisonRowRecord> rows = c.rows;
  const auto order = [](const ComparisonRowRecord& r) { return std::min(verdict_order(r.verdict), 4); };
  std::stable_sort(rows.begin(), rows.end(), [&](const ComparisonRowRecord& a, const ComparisonRowRecord& b) { return order(a) < order(b); });
  // A case is model/workload/policy/soc: the model and the SoC every row shares are said once
  // above the table, as the summary does, and each row names the rest.
  const auto part = [](const std::string& name, bool last) {
    const std::size_t at = last ? name.rfind('/') : name.find('/');
    return at == std::string::npos ? std::string() : last ? name.substr(at + 1) : name.substr(0, at);
  };
  bool same_model = !rows.empty(), same_soc = !rows.empty();
  for (const ComparisonRowRecord& r : rows) {
    same_model = same_model && std::count(r.case_name.begin(), r.case_name.end(), '/') == 3 && part(r.case_name, false) == part(rows.front().case_name, false);
    same_soc = same_soc && std::count(r.case_name.begin(), r.case_name.end(), '/') == 3 && part(r.case_name, true) == part(rows.front().case_name, true);
  }
  const auto shown_name = [&](const std::string& name) {
    std::string shown = name;
    if (same_model) shown = shown.substr(shown.find('/') + 1);
    if (same_soc) shown = shown.substr(0, shown.rfind('/'));
    return shown;
  };
  if (same_model || same_soc) {
    std::string every;
    if (same_model) every += "model " + part(rows.front().case_name, false);
    if (same_soc) every += std::string(every.empty() ? "" : ", ") + "soc " + part(rows.front().case_name, true);
    page << "<p>every case: " + h(every) + "</p>\n";
  }
  // Seven narrow columns that fit a 700 px window; what a row says in words (why it is
  // unreliable, which CPU-time row judged it, its acknowledgement) takes a line of its own below.
  const auto row_html = [&](const ComparisonRowRecord& r) {
    // No estimate (an unreliable row): dashes, never a 0% that reads as unchanged. A
    // deterministic row (exact or modelled figures) has a change and neither interval nor test.
    // A change from zero has no ratio: it says so rather than a dash that reads as no estimate.
    const bool from_zero = !r.ratio && r.baseline_median && r.candidate_median && *r.baseline_median == 0.0 && *r.candidate_median != 0.0;
    const std::string delta = r.ratio ? percent(*r.ratio) : from_zero ? "from 0" : "-";
    const std::string interval = !r.ratio ? "" : r.statistical() ? "[" + percent(*r.ratio_low) + ", " + percent(*r.ratio_high) + "]" : "exact";
    const std::string p = r.adjusted_p && r.statistical() ? fmt::format("{:.3g}", *r.adjusted_p) : "-";
    std::string note;
    if (r.judged_by) note = "judged by " + *r.judged_by;
    if (!r.ratio && !r.note.empty()) note += (note.empty() ? "" : "; ") + r.note;
    if (!r.acknowledged.empty()) note += (note.empty() ? "" : "; ") + std::string("acknowledged: ") + r.acknowledged;
    const auto num = [](const std::string& text) { return "<td class=\"num\">" + h(text) + "</td>"; };
    const std::string tr = "<tr" + std::string(r.acknowledged.empty() ? "" : " class=\"acked\"") + ">";
    return tr + "<td" + (note.empty() ? "" : " rowspan=\"2\"") + "><a href=\"#" + case_anchor(r.case_name) + "\">" + breakable(shown_name(r.case_name)) +
           "</a></td><td>" + breakable(r.metric) + "</td>" + num(metric_value_text(r.baseline_median, r.metric)) +
           num(metric_value_text(r.candidate_median, r.metric)) + "<td class=\"num\">" + h(delta) +
           (interval.empty() ? "" : "<br/><span class=\"ci\">" + h(interval) + "</span>") + "</td>" + num(p) + "<td class=\"verdict " +
           verdict_name(r.verdict) + "\">" + h(verdict_name(r.verdict)) + "</td></tr>\n" +
           (note.empty() ? "" : tr + "<td colspan=\"6\" class=\"row-note\">" + h(note) + "</td></tr>\n");
  };
  const std::string head = "<table class=\"rows verdict-rows\">\n<thead><tr><th>case</th><th>metric</th><th class=\"num\">baseline</th>"
                           "<th class=\"num\">candidate</th><th class=\"num\">change, 95% CI</th><th class=\"num\">p (adj.)</th>"
                           "<th>verdict</th></tr></thead>\n<tbody>\n";
  std::string shown, rest;
  int rest_count = 0;
  for (const ComparisonRowRecord& r : rows) {
    const int k = order(r);
    if (k <= 2) {
      shown += row_html(r);
    } else if (k == 3 && rest_count < 200) {
      rest += row_html(r);
      ++rest_count;
    }
  }
  if (shown.empty()) {
    page << line("no row regressed, improved or unreliable");
  } else {
    page << "<div class=\"scroll\">" + head + shown + "</tbody>\n</table>\n</div>\n";
  }
  if (!rest.empty()) {
    page << fmt::format("<details><summary>{} inconclusive rows{}</summary>\n", c.inconclusive, rest_count < c.inconclusive ? " (first 200)" : "") +
                "<div class=\"scroll\">" + head + rest + "</tbody>\n</table>\n</div>\n</details>\n";
  }
  page << "</section>\n";
}

}  // namespace kvbench::report
