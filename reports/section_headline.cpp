#include "report_sections.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "human_units.h"
#include "metric_table.h"

namespace kvbench::report {

namespace {

struct Column {
  const char* metric;
  const char* head;
};

// The figures a user reads a run by, as the terminal summary shows them: the long prompt's TTFT
// and the follow-ups' median apart (their mean is a time no request took).
const std::vector<Column>& columns() {
  static const std::vector<Column> c = {
      {"ttft_first_request_ms", "ttft first request"}, {"ttft_followup_ms_p50", "ttft next p50"},
      {"prefill_tps", "prefill tok/s"},                {"tpot_ms_p99", "tpot p99"},
      {"decode_tps", "decode tok/s"},                  {"kv_bytes_per_token", "KV per token"},
      {"peak_l1_bytes", "peak L1"},                    {"token_drop_ratio", "token drop"},
      {"attn_rel_error", "attn rel err"},              {"ppl_delta_pct", "ppl delta"},
  };
  return c;
}

const CaseView* find_case(const RunView& run, const std::string& name) {
  for (const CaseView& c : run.cases) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

std::string cell(const CaseView& c, const std::string& name, bool& extrapolated) {
  const auto f = c.figures.find(name);
  if (f == c.figures.end() || !f->second.median) return "-";
  extrapolated = extrapolated || f->second.extrapolated;
  const double v = *f->second.median;
  const std::string text = name == "token_drop_ratio" ? significant(v * 100.0) + "%" : human_value(v, metric(name).unit);
  return text + (f->second.extrapolated ? "*" : "");
}

}  // namespace

void headline_section(Page& page, const ReportModel& m) {
  page << section_open("headline", "Headline figures");
  // A case on the host shows what was measured here; a case priced for a SoC its modelled times
  // (its exact figures are the same on both views).
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> anchors;
  std::vector<bool> used(columns().size(), false);
  bool extrapolated = false, several_socs = false;
  for (const CaseView& c : m.host.cases) several_socs = several_socs || c.soc != m.host.cases.front().soc;
  for (const CaseView& c : m.host.cases) {
    if (c.status == "skipped") continue;
    const bool modelled = c.soc != "host";
    const CaseView* shown = modelled ? find_case(m.model, c.name) : &c;
    if (shown == nullptr) continue;
    std::vector<std::string> row = {case_label(c, several_socs), modelled ? "model (" + c.soc + ")" : "host"};
    for (std::size_t k = 0; k < columns().size(); ++k) {
      row.push_back(cell(*shown, columns()[k].metric, extrapolated));
      used[k] = used[k] || row.back() != "-";
    }
    rows.push_back(std::move(row));
    anchors.push_back(case_anchor(c.name));
  }
  if (rows.empty()) {
    page << line("no cases with figures") << "</section>\n";
    return;
  }
  // Only the columns some case has a figure for, and the clock once when every row has the same.
  bool one_clock = true;
  for (const auto& row : rows) one_clock = one_clock && row[1] == rows.front()[1];
  std::string html = std::string("<div class=\"scroll\"><table class=\"headline\">\n<thead><tr><th>case</th>") + (one_clock ? "" : "<th>clock</th>");
  for (std::size_t k = 0; k < columns().size(); ++k) {
    if (used[k]) html += "<th class=\"num\" title=\"" + h(columns()[k].metric) + "\">" + h(columns()[k].head) + "</th>";
  }
  html += "</tr></thead>\n<tbody>\n";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& row = rows[i];
    html += "<tr><td><a href=\"#" + anchors[i] + "\">" + breakable(row[0]) + "</a></td>" + (one_clock ? "" : "<td>" + h(row[1]) + "</td>");
    for (std::size_t k = 0; k < columns().size(); ++k) {
      if (used[k]) html += "<td class=\"num\">" + h(row[k + 2]) + "</td>";
    }
    html += "</tr>\n";
  }
  html += "</tbody>\n</table></div>\n";
  page << html;
  std::string notes = (one_clock ? "clock: " + rows.front()[1] + "; " : std::string()) +
                      "medians over repetitions; - where a figure does not apply (one request: no follow-up)";
  if (extrapolated) notes += "; * extrapolated from the executed layers or queries to the whole model";
  page << "<p class=\"note\">" + h(notes) + "</p>\n</section>\n";
}

}  // namespace kvbench::report
