#include "report_sections.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "metric_table.h"
#include "run_event.h"

namespace kvbench::report {

namespace {

constexpr std::size_t kDroppedRows = 50;

void case_section(Page& page, const CaseView& c, const CaseRecordings& recorded) {
  const auto& series = recorded.series;
  const auto& events = recorded.events;
  const auto& histograms = recorded.histograms;
  const CaseShape& shape = recorded.shape;
  const auto get = [&](const char* name) -> const std::vector<double>* {
    const auto it = series.find(name);
    return it == series.end() || it->second.empty() ? nullptr : &it->second;
  };
  std::string marks_text = c.degradation.empty() ? "" : " (degraded)";
  page << "<details class=\"case\" id=\"" + case_anchor(c.name) + "\"><summary>" + h(c.name) + " <span class=\"status\">" + h(c.status + marks_text) + "</span></summary>\n";
  if (c.status != "complete") page << "<p class=\"degraded\">" + h(c.status + (c.note.empty() ? "" : ": " + c.note)) + "</p>\n";
  for (const std::string& l : c.degradation) page << "<p class=\"degraded\">" + h(l) + "</p>\n";
  for (const std::string& l : c.pricing) page << "<p>" + h(l) + "</p>\n";

  // Memory water levels with the cap and the pressure transitions.
  {
    std::vector<Series> levels;
    std::size_t n = 0;
    for (const char* name : {"l0_bytes", "l1_used_bytes", "l2_live_bytes"}) {
      if (const auto* v = get(name)) {
        // Whole-model bytes, as the summary's peaks are: L1 and L2 hold the executed layers' KV,
        // scaled to every layer; L0 is one arena the whole model shares, as peak_l0_bytes is.
        std::vector<double> whole = *v;
        if (std::string(name) != "l0_bytes") {
          for (double& x : whole) x *= shape.layer_scale;
        }
        levels.push_back(bucketed(name, whole));
        n = std::max(n, v->size());
      }
    }
    std::vector<Level> caps;
    // One mark per step with pressure changes: the states it went through ("safe to warning to
    // safe"), its first and last with the count when it went through more.
    std::vector<Mark> transitions;
    std::vector<std::vector<std::string>> states;
    for (const RunEvent& e : events) {
      if (e.kind != EventKind::Pressure) continue;
      if (caps.empty()) caps.push_back({static_cast<double>(e.l1_capacity_bytes) * shape.layer_scale, "L1 cap"});
      const auto step = static_cast<double>(e.step);
      if (transitions.empty() || transitions.back().x != step) {
        if (transitions.size() == 12) continue;
        transitions.push_back({step, ""});
        states.push_back({std::string(kv::pressure_name(e.from))});
      }
      states.back().emplace_back(kv::pressure_name(e.to));
    }
    for (std::size_t i = 0; i < transitions.size(); ++i) {
      const auto& s = states[i];
      if (s.size() <= 3) {
        for (const std::string& state : s) transitions[i].label += (transitions[i].label.empty() ? "" : " to ") + state;
      } else {
        transitions[i].label = fmt::format("{} to {} ({} changes)", s.front(), s.back(), s.size() - 1);
      }
    }
    if (levels.empty()) {
      page << line("memory water levels: no data (the case recorded no memory samples)");
    } else {
      page.plot(line_over_steps("Memory water levels", Axis{"step", ""}, Axis{"occupancy, whole model", "bytes"}, levels, caps, transitions),
                fmt::format("L0, L1 and L2 occupancy per step; L1 and L2 scaled from the executed layers to the whole model ({:.3g}x) "
                            "as the summary's peak L1 is, L0 (one arena for every layer) as it is; each point is the largest of {} steps",
                            shape.layer_scale, bucket_size(n)));
    }
  }
  // Swap bandwidth.
  {
    std::vector<Series> swap;
    for (const char* name : {"swap_in_gb_per_s", "swap_out_gb_per_s"}) {
      if (const auto* v = get(name)) swap.push_back(bucketed(name, *v));
    }
    const bool any = std::any_of(swap.begin(), swap.end(), [](const Series& s) {
      return std::any_of(s.y.begin(), s.y.end(), [](double v) { return v > 0.0; });
    });
    if (!any) {
      page << line(c.soc == "host" ? "swap bandwidth: no data (nothing moved between L1 and L2)"
                                   : "swap bandwidth: no data (a host-clock series: only on the host's case)");
    } else {
      page.plot(line_over_steps("Swap bandwidth", Axis{"step", ""}, Axis{"bandwidth", "GB/s"}, swap), "host clock");
    }
  }
  // Time breakdown: prefill and decode apart, each on its own scale (decode is what tpot is
  // made of, and a prefill thousands of times longer would hide it).
  {
    const std::vector<std::string> spans = {"attn_compute", "kv_quant", "page_alloc", "select", "dma_wait", "model_compute"};
    bool any = false;
    for (const char* phase : {"prefill", "decode"}) {
      Bars b{phase, {}};
      bool phase_any = false;
      for (const std::string& span : spans) {
        const auto v = figure(c, span_metric_name(phase, span));
        b.values.push_back(v.value_or(0.0));
        phase_any = phase_any || (v && *v > 0.0);
      }
      if (!phase_any) continue;
      any = true;
      page.plot(grouped_bars(std::string(phase == std::string("prefill") ? "Prefill" : "Decode") + " time by span", Axis{"time", "ms"}, spans,
                             {b}),
                std::string("the ") + phase + " phase's spans, median over repetitions");
    }
    if (!any) page << line(c.soc == "host" ? "time breakdown: no data" : "time breakdown: no data (host-clock spans: only on the host's case)");
  }
  // TPOT distribution.
  if (const auto* tpot = get("tpot_ms"); tpot != nullptr && !tpot->empty()) {
    const auto [lo_it, hi_it] = std::minmax_element(tpot->begin(), tpot->end());
    const double lo = *lo_it, hi = *hi_it;
    constexpr int kBins = 20;
    std::vector<double> counts(kBins, 0.0);
    std::vector<std::string> bins;
    const double width = hi > lo ? (hi - lo) / kBins : 1.0;
    for (double v : *tpot) {
      if (std::isfinite(v)) counts[static_cast<std::size_t>(std::clamp(static_cast<int>((v - lo) / width), 0, kBins - 1))] += 1.0;
    }
    for (int b = 0; b < kBins; ++b) bins.push_back(fmt::format("{:.3g}", lo + width * b));
    page.plot(histogram("TPOT distribution", Axis{"time per output token, bin start", "ms"}, Axis{"steps", "count"}, bins, counts),
              "host clock, repetition 1");
  } else {
    page << line("TPOT distribution: no data (no decode step timed on the host clock)");
  }
  // Selection: keep ratio and importance scores.
  if (!shape.selects) {
    page << line("keep ratio and importance scores: the policy's selector keeps pages by position only (full or window)");
  } else if (const auto* keep = get("keep_ratio")) {
    page.plot(line_over_steps("Keep ratio", Axis{"selection", ""}, Axis{"tokens kept / context", "ratio"}, {bucketed("keep_ratio", *keep)}),
              fmt::format("per selection (step and layer); each point the largest of {}", bucket_size(keep->size())));
  } else {
    page << line("keep ratio: no data (full attention selects nothing)");
  }
  const auto importance = histograms.find("importance_score");
  if (shape.selects && importance != histograms.end() && !importance->second.empty()) {
    const auto& counted = importance->second;
    std::vector<std::string> bins;
    std::vector<double> counts;
    const auto n = counted.size();
    for (std::size_t b = 0; b < n; ++b) {
      bins.push_back(fmt::format("{:.2f}", static_cast<double>(b) / static_cast<double>(n)));
      counts.push_back(static_cast<double>(counted[b]));
    }
    page.plot(histogram("Importance scores", Axis{"page score, normalised per head", ""}, Axis{"pages", "count"}, bins, counts),
              "middle pages' scores, pooled over heads and selections");
  } else if (shape.selects) {
    page << line("importance scores: no data (no middle page was scored)");
  }
  if (const auto* drift = get("scale_drift")) {
    page.plot(line_over_steps("Scale drift", Axis{"sealed page", ""}, Axis{"scale drift", "ratio"}, {bucketed("scale_drift", *drift)}),
              fmt::format("per sealed page; each point the largest of {}", bucket_size(drift->size())));
  } else {
    page << line("scale drift: no data (no quantized page was sealed)");
  }
  // Dropped critical tokens.
  std::string rows;
  std::size_t dropped = 0;
  for (const RunEvent& e : events) {
    if (e.kind != EventKind::TokenDropped) continue;
    if (dropped++ >= kDroppedRows) continue;
    rows += "<tr><td>" + std::to_string(e.step) + "</td><td>" + std::to_string(e.layer) + "</td><td>" + std::to_string(e.q_head) +
            "</td><td>" + std::to_string(e.position) + "</td><td>" + std::to_string(e.weight) + "</td></tr>\n";
  }
  if (dropped == 0) {
    page << line("dropped critical tokens: none");
  } else {
    page << fmt::format("<details><summary>dropped critical tokens: {} logged{}</summary>\n", dropped,
                        dropped > kDroppedRows ? fmt::format(", the first {} shown", kDroppedRows) : "") +
                "<table>\n<thead><tr><th>step</th><th>layer</th><th>head</th><th>position</th><th>weight</th></tr></thead>\n<tbody>\n" +
                rows + "</tbody>\n</table>\n</details>\n";
  }
  page << "</details>\n";
}

// Scripts of several requests (rag requests, roleplay sessions) and roleplay's turns: per (model,
// workload), one line per policy over the request (or turn) index, so that a policy with the
// prefix cache and one without sit side by side, and the quality of later requests and turns
// shows next to the first's.
void requests_plots(Page& page, const ReportModel& m) {
  std::map<std::string, std::vector<const CaseView*>> groups;  // model/workload -> cases with the series
  for (const CaseView& c : m.host.cases) {
    const auto recorded = m.recordings.find(c.name);
    if (recorded == m.recordings.end()) continue;
    const auto& series = recorded->second.series;
    if (series.count("ttft_ms_by_request") == 0 && series.count("attn_mass_recall_by_turn") == 0) continue;
    groups[c.model + "/" + c.workload].push_back(&c);
  }
  const bool warm = m.host.prefix_cache_start == "warm";
  for (const auto& entry : groups) {
    // Named, not a structured binding: clang 14 (the sanitizer tree's compiler) cannot capture one.
    const std::string& group = entry.first;
    const auto& cases = entry.second;
    const auto plot = [&](const char* name, const std::string& title, const Axis& y, const std::string& caption,
                          const char* x_name = "request") {
      std::vector<Series> lines;
      for (const CaseView* c : cases) {
        const auto& series = m.recordings.at(c->name).series;
        const auto it = series.find(name);
        if (it == series.end()) continue;
        Series line{c->policy, {}, it->second};
        for (std::size_t i = 0; i < it->second.size(); ++i) line.x.push_back(static_cast<double>(i + 1));
        lines.push_back(std::move(line));
      }
      if (!lines.empty()) page.plot(line_over_steps(title + ": " + group, Axis{x_name, ""}, y, lines), caption);
    };
    plot("ttft_ms_by_request", "TTFT by request", Axis{"time to first token", "ms"},
         warm ? "host clock, repetition 1; the run started warm (prefix_warm): every request's first prompt was cached by an "
                "unrecorded pass before the repetition"
              : "host clock, repetition 1; request 1 starts from an empty prefix cache, later ones may find its prompt cached "
                "(prefix_hit_rate)");
    plot("attn_mass_recall_by_request", "Attention mass recall by request", Axis{"attn_mass_recall", "ratio"},
         "exact, repetition 1; mean over the request's sampled decode checks");
    plot("needle_recall_by_request", "Needle recall by request", Axis{"needle_recall", "ratio"}, "exact, repetition 1");
    plot("attn_mass_recall_by_turn", "Attention mass recall by turn", Axis{"attn_mass_recall", "ratio"},
         "exact, repetition 1; mean over every session's sampled decode checks in that turn", "turn");
    plot("needle_recall_by_turn", "Needle recall by turn", Axis{"needle_recall", "ratio"}, "exact, repetition 1", "turn");
  }
}

}  // namespace

void cases_section(Page& page, const ReportModel& m) {
  const RunView& run = m.host;
  page << section_open("cases", "Cases");
  if (run.cases.empty()) page << line("no cases");
  requests_plots(page, m);
  for (const CaseView& c : run.cases) {
    if (c.status == "skipped") {
      page << "<p id=\"" + case_anchor(c.name) + "\">" + h(c.name + ": skipped: " + c.note) + "</p>\n";
    } else if (priced_from_host(run, c)) {
      // The same engine run as the host's case, priced for this SoC: its recordings are the host case's.
      std::string notes;
      for (const std::string& l : c.pricing) notes += " " + l;
      page << "<p class=\"priced\" id=\"" + case_anchor(c.name) + "\">" + h(c.name + ": priced from the host case's engine run (its recordings are the host case's)." + notes) +
                  "</p>\n";
    } else {
      case_section(page, c, m.recordings.at(c.name));
    }
  }
  page << "</section>\n";
}

}  // namespace kvbench::report
