// The page a report is built into, and the small pieces every section shares: escaping, the
// one-line "no data" paragraph, section headings, case anchors and labels, long series reduced
// to what a plot can show.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "html.h"
#include "plots.h"
#include "report.h"
#include "run_view.h"

namespace kvbench::report {

inline constexpr std::size_t kMaxPoints = 120;  // per series: a plot's points and its data table

inline std::string h(const std::string& s) { return escape_html(s); }

// A name set in a narrow column: escaped, with a break opportunity after each '/' and '_' (a
// case's parts, a metric's words), so it wraps between its parts and never inside one.
inline std::string breakable(const std::string& s) {
  std::string out, part;
  for (char ch : s) {
    part += ch;
    if (ch == '/' || ch == '_') {
      out += h(part) + "<wbr/>";
      part.clear();
    }
  }
  return out + h(part);
}

// A ratio as a signed percentage change ("+12.5%").
inline std::string percent(double ratio) { return fmt::format("{:+.1f}%", (ratio - 1.0) * 100.0); }

// Long series reduced to at most kMaxPoints: each point the largest value of its run of steps
// (peaks are what a water level or a stall is about).
inline Series bucketed(const std::string& name, const std::vector<double>& values) {
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

inline std::size_t bucket_size(std::size_t n) { return std::max<std::size_t>(1, (n + kMaxPoints - 1) / kMaxPoints); }

// The page: HTML with plots in place, drawn together at the end through one gnuplot process.

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
      const std::string& caption = captions_[static_cast<std::size_t>(index)];
      body += "<figcaption>" + h(p.title) + (caption.empty() ? "" : ": " + h(caption)) + (p.note.empty() ? "" : "<br/>" + h(p.note)) + "</figcaption>\n";
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


inline std::string line(const std::string& text) { return "<p class=\"empty\">" + h(text) + "</p>\n"; }

// "<section id=...><h2>title</h2>"; the section closes itself.
std::string section_open(const std::string& id, const std::string& title);
// The id of a case's part of the page, for links from the verdict.
std::string case_anchor(const std::string& name);
// workload/policy, with the SoC when the run has several.
std::string case_label(const CaseView& c, bool with_soc);
// A case's median of a metric, when it has one.
std::optional<double> figure(const CaseView& c, const std::string& name);

}  // namespace kvbench::report
