#include "report.h"

#include "comparison_record.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "change_points.h"
#include "html.h"
#include "metric_table.h"
#include "model/synthetic_presets.h"
#include "pareto.h"
#include "plots.h"
#include "results_reader.h"
#include "run_view.h"

namespace kvbench::report {

namespace {

using json = nlohmann::json;

std::string h(const std::string& s) { return escape_html(s); }

constexpr std::size_t kMaxPoints = 120;  // per series: a plot's points and its data table
constexpr std::size_t kDroppedRows = 50;

const std::vector<std::string>& headline_metrics() {
  static const std::vector<std::string> names = {"decode_tps",  "ttft_ms",          "tpot_ms_p99",      "peak_l1_bytes",
                                                 "kv_bytes_per_token", "ppl_delta_pct", "attn_mass_recall", "token_drop_ratio"};
  return names;
}

std::string percent(double ratio) { return fmt::format("{:+.1f}%", (ratio - 1.0) * 100.0); }

// Long series reduced to at most kMaxPoints: each point the largest value of its run of steps
// (peaks are what a water level or a stall is about).
Series bucketed(const std::string& name, const std::vector<double>& values) {
  Series s;
  s.name = name;
  const std::size_t n = values.size();
  const std::size_t per = std::max<std::size_t>(1, (n + kMaxPoints - 1) / kMaxPoints);
  for (std::size_t i = 0; i < n; i += per) {
    double top = -INFINITY;
    for (std::size_t k = i; k < std::min(n, i + per); ++k) {
      if (std::isfinite(values[k])) top = std::max(top, values[k]);
    }
    s.x.push_back(static_cast<double>(i));
    s.y.push_back(std::isfinite(top) ? top : NAN);
  }
  return s;
}

std::size_t bucket_size(std::size_t n) { return std::max<std::size_t>(1, (n + kMaxPoints - 1) / kMaxPoints); }

// The page: HTML with plots in place, drawn together at the end through one gnuplot process.
class Page {
 public:
  Page& operator<<(const std::string& html) {
    parts_.push_back({html, -1});
    return *this;
  }
  void plot(Plot p, const std::string& caption = "") {
    plots_.push_back(std::make_unique<Plot>(std::move(p)));
    captions_.push_back(caption);
    parts_.push_back({"", static_cast<int>(plots_.size()) - 1});
  }
  ReportOutcome finish(const std::string& gnuplot, const std::string& head, const std::string& tail) {
    std::vector<Plot*> all;
    for (auto& p : plots_) all.push_back(p.get());
    const RenderOutcome drawn = render(all, gnuplot);
    ReportOutcome out;
    out.plots = static_cast<int>(plots_.size());
    out.plot_note = drawn.note;
    std::string body;
    for (const auto& [html, index] : parts_) {
      if (index < 0) {
        body += html;
        continue;
      }
      const Plot& p = *plots_[static_cast<std::size_t>(index)];
      const std::string svg = p.svg.empty() ? "" : inline_svg(p.svg, fmt::format("p{}-", index), p.title);
      out.drawn += svg.empty() ? 0 : 1;
      body += "<figure>\n";
      if (!svg.empty()) {
        body += svg + "\n";
      } else if (drawn.available) {
        body += "<p class=\"note\">" + h(p.error.empty() ? "this plot's SVG was not well-formed and is left out" : p.error) + "</p>\n";
      }
      body += "<figcaption>" + h(p.title) + (captions_[static_cast<std::size_t>(index)].empty() ? "" : ": " + h(captions_[static_cast<std::size_t>(index)])) +
              "</figcaption>\n";
      body += std::string("<details class=\"data\"") + (svg.empty() ? " open=\"open\"" : "") + "><summary>data</summary>\n" + table(p.data) +
              "</details>\n</figure>\n";
    }
    const std::string note = drawn.available ? (drawn.note.empty() ? "" : "<p class=\"note\">" + h(drawn.note) + "</p>\n")
                                             : "<p class=\"note\" id=\"plots-unavailable\">" + h(drawn.note) + "</p>\n";
    out.html = head + note + body + tail;
    return out;
  }

  static std::string table(const DataTable& t) {
    std::string s = "<table>\n<thead><tr>";
    for (const std::string& c : t.header) s += "<th>" + h(c) + "</th>";
    s += "</tr></thead>\n<tbody>\n";
    for (const auto& row : t.rows) {
      s += "<tr>";
      for (const std::string& c : row) s += "<td>" + h(c) + "</td>";
      s += "</tr>\n";
    }
    return s + "</tbody>\n</table>\n";
  }

 private:
  std::vector<std::pair<std::string, int>> parts_;
  std::vector<std::unique_ptr<Plot>> plots_;
  std::vector<std::string> captions_;
};

std::string line(const std::string& text) { return "<p class=\"empty\">" + h(text) + "</p>\n"; }

std::string section_open(const std::string& id, const std::string& title) {
  return "<section id=\"" + id + "\">\n<h2>" + h(title) + "</h2>\n";
}

// The id of a case's part of the page, for links from the verdict.
std::string case_anchor(const std::string& name) {
  std::string id = "case-";
  for (char ch : name) id += std::isalnum(static_cast<unsigned char>(ch)) != 0 ? ch : '-';
  return id;
}

std::string case_label(const CaseView& c, bool with_soc) {
  return c.workload + "/" + c.policy + (with_soc ? "/" + c.soc : "");
}

// --- verdict ---------------------------------------------------------------------------------

void verdict_section(Page& page, const ReportOptions& o, const RunView& run) {
  page << section_open("verdict", "Verdict");
  std::vector<const CaseView*> degraded;
  for (const CaseView& c : run.cases) {
    if (!c.degradation.empty()) degraded.push_back(&c);
  }
  if (!o.comparison) {
    page << "<p class=\"banner none\">no baseline: nothing to compare run " + std::to_string(run.id) +
                " with (gate it, or pass <code>--baseline</code>)</p>\n";
  } else {
    const ComparisonRecord& c = *o.comparison;
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
    page << "<p>" + h(o.baseline_note) + "</p>\n";
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
    // A record from an older kvbench may hold its rows in another order.
    std::vector<ComparisonRowRecord> rows = c.rows;
    const auto order = [](const ComparisonRowRecord& r) { return std::min(verdict_order(r.verdict), 4); };
    std::stable_sort(rows.begin(), rows.end(), [&](const ComparisonRowRecord& a, const ComparisonRowRecord& b) { return order(a) < order(b); });
    const auto row_html = [](const ComparisonRowRecord& r) {
      // No estimate (an unreliable row): dashes and the reason, never a 0% that reads as unchanged.
      const std::string delta = r.ratio ? percent(*r.ratio) : "-";
      const std::string interval =
          r.ratio ? "[" + percent(r.ratio_low.value_or(*r.ratio)) + ", " + percent(r.ratio_high.value_or(*r.ratio)) + "]" : "-";
      const std::string p = r.adjusted_p ? fmt::format("{:.3g}", *r.adjusted_p) : "-";
      std::string verdict = verdict_name(r.verdict);
      if (r.judged_by) verdict += " (judged by " + *r.judged_by + ")";
      if (!r.ratio && !r.note.empty()) verdict += ": " + r.note;
      return "<tr" + std::string(r.acknowledged.empty() ? "" : " class=\"acked\"") + "><td><a href=\"#" + case_anchor(r.case_name) + "\">" +
             h(r.case_name) + "</a></td><td>" + h(r.metric) +
             "</td><td>" + h(metric_value_text(r.baseline_median, r.metric)) + "</td><td>" +
             h(metric_value_text(r.candidate_median, r.metric)) + "</td><td>" + h(delta) + "</td><td>" + h(interval) + "</td><td>" + h(p) +
             "</td><td>" + h(verdict) + (r.acknowledged.empty() ? "" : " (acknowledged: " + h(r.acknowledged) + ")") + "</td></tr>\n";
    };
    const std::string head = "<table class=\"rows\">\n<thead><tr><th>case</th><th>metric</th><th>baseline</th><th>candidate</th>"
                             "<th>delta</th><th>CI</th><th>p (adjusted)</th><th>verdict</th></tr></thead>\n<tbody>\n";
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

// --- trends ----------------------------------------------------------------------------------

void trends_section(Page& page, ResultsStore& store, const ReportOptions& o, const RunView& run, const std::string& suite,
                    std::int64_t baseline_run) {
  page << section_open("trends", "Trends");
  RunFilter filter;
  filter.suite = suite;
  filter.status = "complete";
  std::vector<std::int64_t> ids;
  for (const RunRecord& r : list_runs(store, filter)) {
    if (r.id <= run.id) ids.push_back(r.id);
  }
  if (std::find(ids.begin(), ids.end(), run.id) == ids.end()) ids.push_back(run.id);
  std::sort(ids.begin(), ids.end());
  if (static_cast<int>(ids.size()) > o.history) ids.erase(ids.begin(), ids.end() - o.history);
  if (ids.size() < 2) {
    page << line(fmt::format("no history: run {} is the only complete run of suite {} so far", run.id, suite));
    page << "</section>\n";
    return;
  }
  page << "<p>" + h(fmt::format("The last {} complete runs of suite {} (medians per case on each metric's own clock); dashed marks "
                                "are change points found in each case's history and the baseline run.",
                                ids.size(), suite)) +
              "</p>\n";
  std::map<std::int64_t, RunView> views;
  for (std::int64_t id : ids) views.emplace(id, id == run.id ? run : load_run_view(store, id));
  std::vector<std::string> labels;
  for (std::int64_t id : ids) labels.push_back(std::to_string(id));
  std::vector<std::string> cases;
  for (const CaseView& c : run.cases) cases.push_back(c.name);
  const bool many_socs = std::any_of(run.cases.begin(), run.cases.end(), [&](const CaseView& c) { return c.soc != run.cases.front().soc; });
  for (const std::string& name : headline_metrics()) {
    const MetricDef& def = metric(name);
    std::vector<Series> series;
    std::map<std::size_t, std::vector<std::string>> changes;  // run position -> the cases that stepped there
    for (std::size_t k = 0; k < run.cases.size(); ++k) {
      const CaseView& c = run.cases[k];
      Series s;
      s.name = case_label(c, many_socs);
      std::vector<double> clean;
      std::vector<std::size_t> where;
      for (std::size_t i = 0; i < ids.size(); ++i) {
        double v = NAN;
        for (const CaseView& other : views.at(ids[i]).cases) {
          if (other.name != c.name) continue;
          const auto f = other.figures.find(name);
          if (f != other.figures.end() && f->second.median) v = *f->second.median;
        }
        s.x.push_back(static_cast<double>(i));
        s.y.push_back(v);
        if (std::isfinite(v)) {
          clean.push_back(v);
          where.push_back(i);
        }
      }
      if (clean.empty()) continue;
      for (const ChangePoint& cp : find_change_points(clean)) changes[where[static_cast<std::size_t>(cp.index)]].push_back(s.name);
      series.push_back(std::move(s));
    }
    if (series.empty()) {
      page << line(fmt::format("{}: no data (no run of suite {} records it)", name, suite));
      continue;
    }
    // One mark per run where cases stepped, naming the case or counting them.
    std::vector<Mark> marks;
    for (const auto& [at, names] : changes) {
      marks.push_back({static_cast<double>(at), names.size() == 1 ? "change: " + names.front() : fmt::format("change: {} cases", names.size())});
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == baseline_run) marks.push_back({static_cast<double>(i), "baseline"});
    }
    page.plot(lines_over_runs(name + " over runs", Axis{name, def.unit}, labels, series, marks), def.description);
  }
  page << "</section>\n";
}

// --- per case --------------------------------------------------------------------------------

std::optional<double> figure(const CaseView& c, const std::string& name) {
  const auto f = c.figures.find(name);
  if (f == c.figures.end()) return std::nullopt;
  return f->second.median;
}

// What the stored configuration says about a case's model and policy, for reading its series.
struct CaseShape {
  double layer_scale = 1.0;     // model layers / executed layers: series of executed layers to the whole model
  bool selects = true;          // its selector chooses pages (not full or window)
};

CaseShape case_shape(const json& config, const CaseView& c) {
  CaseShape shape;
  if (!config.is_object()) return shape;
  for (const json& m : config.value("models", json::array())) {
    if (!m.is_object() || m.value("name", "") != c.model || m.value("backend", "") != "synthetic") continue;
    for (const kv::SyntheticPreset& p : kv::synthetic_presets()) {
      if (p.name == m.value("preset", "") && m.value("sample_layers", 0) > 0) {
        shape.layer_scale = static_cast<double>(p.layers) / std::min(p.layers, m.value("sample_layers", 1));
      }
    }
  }
  for (const json& p : config.value("policies", json::array())) {
    if (!p.is_object() || p.value("name", "") != c.policy) continue;
    const std::string selector = p.contains("sparse") && p["sparse"].is_object() ? p["sparse"].value("selector", "full") : "full";
    shape.selects = selector != "full" && selector != "window";
  }
  return shape;
}

void case_section(Page& page, ResultsStore& store, const RunView& run, const CaseView& c, const CaseShape& shape) {
  const auto series = load_series(store, run.id, c.name, 1);
  const auto events = load_events(store, run.id, c.name, 1);
  const auto histograms = load_histograms(store, run.id, c.name, 1);
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
        // Whole-model bytes, as the summary's peak L1 is.
        std::vector<double> whole = *v;
        for (double& x : whole) x *= shape.layer_scale;
        levels.push_back(bucketed(name, whole));
        n = std::max(n, v->size());
      }
    }
    std::vector<Level> caps;
    std::vector<Mark> transitions;
    for (const RunEvent& e : events) {
      if (e.kind != EventKind::Pressure) continue;
      if (caps.empty()) caps.push_back({static_cast<double>(e.l1_capacity_bytes) * shape.layer_scale, "L1 cap"});
      if (transitions.size() < 12) {
        transitions.push_back({static_cast<double>(e.step), std::string(kv::pressure_name(e.from)) + "->" + std::string(kv::pressure_name(e.to))});
      }
    }
    if (levels.empty()) {
      page << line("memory water levels: no data (the case recorded no memory samples)");
    } else {
      page.plot(line_over_steps("Memory water levels", Axis{"step", ""}, Axis{"occupancy, whole model", "bytes"}, levels, caps, transitions),
                fmt::format("L0, L1 and L2 occupancy per step, scaled from the executed layers to the whole model ({:.3g}x) as the "
                            "summary's peak L1 is; each point is the largest of {} steps",
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

void cases_section(Page& page, ResultsStore& store, const RunView& run, const RunRecord& record) {
  const json config = json::parse(record.config_json, nullptr, false);
  page << section_open("cases", "Cases");
  if (run.cases.empty()) page << line("no cases");
  for (const CaseView& c : run.cases) {
    const bool rerun = figure(c, "capacity_rerun").value_or(0.0) > 0.0;
    if (c.status == "skipped") {
      page << "<p id=\"" + case_anchor(c.name) + "\">" + h(c.name + ": skipped: " + c.note) + "</p>\n";
    } else if (c.status == "complete" && c.soc != "host" && !rerun && std::any_of(run.cases.begin(), run.cases.end(), [&](const CaseView& o) {
                 return o.soc == "host" && o.model == c.model && o.workload == c.workload && o.policy == c.policy;
               })) {
      // The same engine run as the host's case, priced for this SoC: its recordings are the host case's.
      std::string notes;
      for (const std::string& l : c.pricing) notes += " " + l;
      page << "<p class=\"priced\" id=\"" + case_anchor(c.name) + "\">" + h(c.name + ": priced from the host case's engine run (its recordings are the host case's)." + notes) +
                  "</p>\n";
    } else {
      case_section(page, store, run, c, case_shape(config, c));
    }
  }
  page << "</section>\n";
}

// --- sparse quality, Pareto, cross-SoC -------------------------------------------------------

std::map<std::string, std::string> policy_budgets(const std::string& config_json) {
  std::map<std::string, std::string> out;
  const json config = json::parse(config_json, nullptr, false);
  if (config.is_discarded() || !config.contains("policies")) return out;
  for (const json& p : config["policies"]) {
    if (!p.is_object() || !p.contains("name")) continue;
    std::string what;
    if (p.contains("sparse") && p["sparse"].is_object()) {
      const json& s = p["sparse"];
      const std::string selector = s.value("selector", "full");
      what = selector;
      if (selector != "full" && s.contains("budget") && s["budget"].is_number()) what += fmt::format(" {:.3g}%", s["budget"].get<double>() * 100.0);
    }
    out[p["name"].get<std::string>()] = what;
  }
  return out;
}

void sparse_section(Page& page, const RunView& run, const RunRecord& record) {
  page << section_open("sparse-quality", "Sparse quality");
  const auto budgets = policy_budgets(record.config_json);
  std::vector<std::string> categories;
  Bars recall{"attn_mass_recall", {}}, oracle{"oracle_mass_recall", {}};
  for (const CaseView& c : run.cases) {
    if (c.soc != run.cases.front().soc) continue;  // exact figures: the same on every SoC
    const auto r = figure(c, "attn_mass_recall"), top = figure(c, "oracle_mass_recall");
    if (!r) continue;
    const auto b = budgets.find(c.policy);
    categories.push_back(c.workload + "/" + c.policy + (b == budgets.end() || b->second.empty() ? "" : " (" + b->second + ")"));
    recall.values.push_back(*r);
    oracle.values.push_back(top.value_or(NAN));
  }
  if (categories.empty()) {
    page << line("no sparse-quality data: no case sampled attention quality");
  } else {
    page.plot(grouped_bars("Attention-mass recall against the oracle", Axis{"attention mass kept", "ratio"}, categories, {recall, oracle}),
              "recall of the selected pages beside the most any selection of as many pages could keep, per policy and budget");
  }
  page << "</section>\n";
}

void pareto_section(Page& page, const RunView& host, const RunView& model) {
  page << section_open("pareto", "Pareto fronts");
  bool ppl = false;
  for (const CaseView& c : host.cases) ppl = ppl || figure(c, "ppl_delta_pct").has_value();
  const std::string accuracy = ppl ? "ppl_delta_pct" : "attn_rel_error";
  const std::vector<ParetoGroup> groups = pareto_groups(host, model, {"kv_bytes_per_token", accuracy}, "");
  int drawn = 0;
  for (const ParetoGroup& g : groups) {
    if (g.points.size() < 2) continue;
    std::vector<ScatterPoint> points;
    for (std::size_t i = 0; i < g.points.size(); ++i) {
      std::string label = g.points[i].label;
      for (const CaseView& c : (g.soc == "host" ? host : model).cases) {
        if (c.model != g.model || c.workload != g.workload || c.soc != g.soc || c.policy != g.points[i].label) continue;
        if (const auto tps = figure(c, "decode_tps")) label += fmt::format(" ({:.3g} tok/s)", *tps);
      }
      points.push_back({g.points[i].values[0], g.points[i].values[1], label, static_cast<bool>(g.result.on_front[i])});
    }
    page.plot(scatter_front("Pareto front: " + g.model + " / " + g.workload + " / " + g.soc, Axis{"kv_bytes_per_token", "bytes"},
                            Axis{accuracy, metric(accuracy).unit}, points),
              "the front joined, dominated policies faded; labels carry decode tok/s (" +
                  std::string(g.soc == "host" ? "measured" : "modelled") + ")");
    ++drawn;
  }
  if (drawn == 0) page << line("no Pareto front: no (model, workload, SoC) has two policies with " + accuracy + " and KV size");
  page << "</section>\n";
}

void cross_soc_section(Page& page, const RunView& model) {
  page << section_open("cross-soc", "Across SoCs");
  // The host's figures stay off these scales: priced as a workstation they would flatten every
  // phone's bars (its measured figures are in the cases above).
  std::vector<std::string> socs, configs;
  bool host = false;
  for (const CaseView& c : model.cases) {
    if (c.soc == "host") {
      host = true;
      continue;
    }
    if (std::find(socs.begin(), socs.end(), c.soc) == socs.end()) socs.push_back(c.soc);
    const std::string config = c.model + "/" + c.workload + "/" + c.policy;
    if (std::find(configs.begin(), configs.end(), config) == configs.end()) configs.push_back(config);
  }
  if (socs.empty()) {
    page << line("no sweep: the run priced no SoC beside the host; `kvbench sweep` prices several");
    page << "</section>\n";
    return;
  }
  if (host) page << line("the host is left out of these charts: its measured figures are in the cases above");
  std::vector<std::string> unfit;
  for (const CaseView& c : model.cases) {
    if (c.soc != "host" && figure(c, "fits_in_memory").value_or(1.0) == 0.0) unfit.push_back(c.model + "/" + c.workload + "/" + c.policy + " on " + c.soc);
  }
  const std::string unfit_text = unfit.empty() ? "" : fmt::format("; does not fit ({}): {}", unfit.size(), unfit.front()) +
                                                          (unfit.size() > 1 ? fmt::format(" and {} more", unfit.size() - 1) : "");
  const std::map<std::string, std::string> captions = {
      {"ttft_ms", "time to first token priced by each SoC's profile: the dense layers' compute and weight traffic and the KV work"},
      {"decode_tps", "decode tokens per second priced by each SoC's profile, dense layers included"},
      {"energy_mj_per_token", "energy per decoded token priced by each SoC's profile"},
      {"memory_headroom_bytes", "the SoC's model budget less weights, peak KV and the runtime reserve: below zero it does not fit"},
  };
  for (const char* name : {"ttft_ms", "decode_tps", "energy_mj_per_token", "memory_headroom_bytes"}) {
    std::vector<Bars> bars;
    for (const std::string& soc : socs) {
      Bars b{soc, {}};
      for (const std::string& config : configs) {
        double v = NAN;
        for (const CaseView& c : model.cases) {
          if (c.soc == soc && c.model + "/" + c.workload + "/" + c.policy == config) v = figure(c, name).value_or(NAN);
        }
        b.values.push_back(v);
      }
      bars.push_back(std::move(b));
    }
    page.plot(grouped_bars(std::string(name) + " per SoC (model clock)", Axis{name, metric(name).unit}, configs, bars),
              captions.at(name) + unfit_text);
  }
  page << "</section>\n";
}

void metadata_section(Page& page, const RunRecord& run) {
  page << section_open("metadata", "Run metadata");
  const json meta = json::parse(run.meta_json, nullptr, false);
  const auto field = [&](const char* key) {
    if (meta.is_discarded() || !meta.contains(key)) return std::string("-");
    return meta[key].is_string() ? meta[key].get<std::string>() : meta[key].dump();
  };
  page << "<table class=\"meta\">\n<tbody>\n";
  const std::vector<std::pair<std::string, std::string>> rows = {
      {"run", std::to_string(run.id) + " (" + run.status + ")"},
      {"suite", run.suite},
      {"started", run.started_at + " to " + (run.ended_at.empty() ? "-" : run.ended_at)},
      {"git sha", run.git_sha + (run.git_dirty ? " (dirty)" : "")},
      {"compiler", field("compiler")},
      {"build", field("build_type")},
      {"CPU", field("cpu_model") + ", " + field("cores") + " cores"},
      {"kernel path", field("kernel_path")},
      {"config hash", run.config_hash},
      {"tags", [&] {
         std::string t;
         for (const std::string& tag : run.tags) t += (t.empty() ? "" : ", ") + tag;
         return t.empty() ? std::string("-") : t;
       }()},
  };
  for (const auto& [k, v] : rows) page << "<tr><th>" + h(k) + "</th><td>" + h(v) + "</td></tr>\n";
  page << "</tbody>\n</table>\n";
  const json config = json::parse(run.config_json, nullptr, false);
  page << "<details><summary>resolved configuration</summary>\n<pre>" + h(config.is_discarded() ? run.config_json : config.dump(2)) +
              "</pre>\n</details>\n";
  page << "<details><summary>machine and run metadata</summary>\n<pre>" + h(meta.is_discarded() ? run.meta_json : meta.dump(2)) +
              "</pre>\n</details>\n";
  page << "</section>\n";
}

const char* const kStyle = R"css(
body { font: 14px/1.45 sans-serif; margin: 1.5em auto; max-width: 1100px; padding: 0 1em; color: #1a1a1a; background: #fff; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 1.8em; }
.banner { font-size: 1.2em; font-weight: bold; padding: 0.6em 0.8em; border: 2px solid; }
.banner.pass { border-color: #1e8449; } .banner.regressed { border-color: #b03a2e; border-width: 4px; }
.banner.inconclusive { border-color: #b9770e; border-style: dashed; } .banner.unreliable { border-color: #b9770e; border-width: 4px; border-style: dashed; } .banner.none { border-color: #888; border-style: dotted; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; overflow-wrap: anywhere; }
.scroll { max-width: 100%; overflow-x: auto; } .changes { margin: 0.5em 0; padding: 0.3em 0.8em; background: #f4f6f8; }
tr.acked td { color: #666; font-style: italic; }
figure { margin: 1em 0; } figcaption { font-size: 0.9em; color: #444; }
svg.plot { width: 100%; height: auto; max-width: 760px; display: block; }
details.case { border: 1px solid #ddd; padding: 0.3em 0.7em; margin: 0.5em 0; }
details.case > summary { font-weight: bold; cursor: pointer; }
.note, .empty { color: #555; font-style: italic; } .degraded { color: #b03a2e; }
pre { background: #f6f6f6; padding: 0.5em; overflow-x: auto; font-size: 0.85em; }
nav a { margin-right: 1em; }
@media print { body { max-width: none; } details.data { display: none; } nav { display: none; } }
)css";

// Progressive enhancement only: printing opens every case; `#measure` (the browser test) opens
// everything and writes each plot's rendered size into the page.
const char* const kScript = R"js(
window.addEventListener('beforeprint', function () {
  document.querySelectorAll('details.case').forEach(function (d) { d.open = true; });
});
// A link to a case opens its part of the page.
function openTarget() {
  // No angle brackets or ampersands here: the page stays well-formed XML.
  var t = document.getElementById(location.hash.slice(1));
  if (t) { if (t.tagName === 'DETAILS') t.open = true; }
}
window.addEventListener('hashchange', openTarget);
window.addEventListener('load', function () {
  openTarget();
  if (location.hash !== '#measure') return;
  document.querySelectorAll('details').forEach(function (d) { d.open = true; });
  document.querySelectorAll('svg.plot').forEach(function (s) {
    var r = s.getBoundingClientRect();
    s.setAttribute('data-rendered', Math.round(r.width) + 'x' + Math.round(r.height));
  });
  // What sticks out at this width: the page, or the verdict section past its own box.
  var over = [];
  var verdict = document.getElementById('verdict');
  if (document.documentElement.scrollWidth - window.innerWidth > 1) over.push('page ' + document.documentElement.scrollWidth);
  if (verdict) { if (verdict.scrollWidth - verdict.clientWidth > 1) over.push('verdict ' + verdict.scrollWidth); }
  document.body.setAttribute('data-overflow', over.length ? over.join(', ') + ' in ' + window.innerWidth : 'none');
  document.body.setAttribute('data-measured', 'yes');
});
)js";

}  // namespace

ReportOutcome build_report(ResultsStore& store, const ReportOptions& o) {
  const RunRecord record = get_run(store, o.run_id, "--run");
  const RunView host = load_run_view(store, o.run_id, Clock::Host);
  const RunView model = load_run_view(store, o.run_id, Clock::Model);
  const std::string suite = o.suite.empty() ? record.suite : o.suite;
  std::int64_t baseline_run = 0;
  if (o.comparison) baseline_run = o.comparison->baseline_run;

  Page page;
  verdict_section(page, o, host);
  trends_section(page, store, o, host, suite, baseline_run);
  cases_section(page, store, host, record);
  sparse_section(page, host, record);
  pareto_section(page, host, model);
  cross_soc_section(page, model);
  metadata_section(page, record);

  const std::string title = fmt::format("kvbench run {}: suite {}", record.id, record.suite);
  std::string head = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<meta name=\"viewport\" "
                     "content=\"width=device-width, initial-scale=1\"/>\n<title>" +
                     h(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<h1>" + h(title) + "</h1>\n<p>" +
                     h(fmt::format("{} ({}), git {}{}, {} cases", record.started_at, record.status, record.git_sha,
                                   record.git_dirty ? " (dirty)" : "", host.cases.size())) +
                     "</p>\n<nav><a href=\"#verdict\">verdict</a><a href=\"#trends\">trends</a><a href=\"#cases\">cases</a><a "
                     "href=\"#sparse-quality\">sparse quality</a><a href=\"#pareto\">Pareto</a><a href=\"#cross-soc\">across SoCs</a><a "
                     "href=\"#metadata\">metadata</a></nav>\n";
  const std::string tail = std::string("<script>") + kScript + "</script>\n</body>\n</html>\n";
  return page.finish(o.gnuplot, head, tail);
}

}  // namespace kvbench::report
