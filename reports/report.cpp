#include "report.h"

#include <fmt/format.h>

#include <string>

#include "report_model.h"
#include "report_page.h"
#include "report_sections.h"

namespace kvbench::report {

namespace {

const char* const kStyle = R"css(
body { font: 14px/1.45 sans-serif; margin: 1.5em auto; max-width: 1100px; padding: 0 1em; color: #1a1a1a; background: #fff; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 1.8em; }
.banner { font-size: 1.2em; font-weight: bold; padding: 0.6em 0.8em; border: 2px solid; }
.banner.pass { border-color: #1e8449; } .banner.regressed { border-color: #b03a2e; border-width: 4px; }
.banner.inconclusive { border-color: #b9770e; border-style: dashed; } .banner.unreliable { border-color: #b9770e; border-width: 4px; border-style: dashed; } .banner.none { border-color: #888; border-style: dotted; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; vertical-align: top; overflow-wrap: break-word; }
td.num { white-space: nowrap; text-align: right; font-variant-numeric: tabular-nums; } th.num { text-align: right; }
.scroll { max-width: 100%; overflow-x: auto; } .changes { margin: 0.5em 0; padding: 0.3em 0.8em; background: #f4f6f8; }
tr.acked td { color: #666; font-style: italic; }
table.verdict-rows, table.headline { font-size: 0.85em; } table.verdict-rows td, table.verdict-rows th { padding: 0.2em 0.4em; }
.ci { color: #555; font-size: 0.9em; } td.row-note { color: #444; font-size: 0.95em; border-top-style: dotted; }
td.verdict.regressed { color: #b03a2e; font-weight: bold; } td.verdict.improved { color: #1e8449; } td.verdict.unreliable { color: #9a6408; }
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
// Whether a stretch of a text node sits on more than one line.
function broken(node, start, end) {
  var r = document.createRange();
  r.setStart(node, start);
  r.setEnd(node, end);
  var rects = r.getClientRects(), top = null, bottom = null;
  for (var i = 0; rects.length > i; i++) {
    if (rects[i].width === 0) continue;
    top = top === null ? rects[i].top : Math.min(top, rects[i].top);
    bottom = bottom === null ? rects[i].top : Math.max(bottom, rects[i].top);
  }
  return top !== null ? bottom - top > 3 : false;
}
// Text that wraps inside a number (with its sign, percent and closing bracket) or a heading
// that breaks inside a word: the reader sees two figures where there is one.
function wrapped() {
  var found = [];
  var walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (var node = walker.nextNode(); node; node = walker.nextNode()) {
    var parent = node.parentElement;
    if (parent.closest('svg, script, style')) continue;
    var heading = parent.closest('th') !== null;
    // A number starts a word: the 7 of syn-7b is not one.
    var pattern = heading ? /()([^\s]+)/g : /(^|[^\w.])(\[?[+-]?\d[\d.,]*(e[+-]?\d+)?%?[,\]]?)/g;
    var text = node.textContent, m;
    while ((m = pattern.exec(text)) !== null) {
      var start = m.index + m[1].length;
      if (m[2].length === 1) continue;
      if (broken(node, start, start + m[2].length)) found.push((heading ? 'heading ' : '') + JSON.stringify(m[2]));
    }
  }
  return found.slice(0, 20);
}
// Text in a plot that covers other text, or that the plot's box cuts off.
function overlaps() {
  var found = [];
  document.querySelectorAll('svg.plot').forEach(function (s) {
    var name = s.querySelector('title') ? s.querySelector('title').textContent : '?';
    var box = s.getBoundingClientRect();
    var texts = [];
    s.querySelectorAll('text').forEach(function (t) {
      var r = t.getBoundingClientRect();
      if (t.textContent.trim() === '' || r.width === 0) return;
      texts.push({ text: t.textContent.trim(), r: r });
      if (box.left - r.left > 1 || box.top - r.top > 1 || r.right - box.right > 1 || r.bottom - box.bottom > 1) {
        found.push(name + ': ' + JSON.stringify(t.textContent.trim()) + ' cut off');
      }
    });
    for (var i = 0; texts.length > i; i++) {
      for (var k = i + 1; texts.length > k; k++) {
        var a = texts[i].r, b = texts[k].r;
        var w = Math.min(a.right, b.right) - Math.max(a.left, b.left), h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
        if (w > 1 ? h > 1 : false) found.push(name + ': ' + JSON.stringify(texts[i].text) + ' over ' + JSON.stringify(texts[k].text));
      }
    }
  });
  return found.slice(0, 40);
}
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
  document.body.setAttribute('data-wrapped', wrapped().join(' | ') || 'none');
  document.body.setAttribute('data-overlaps', overlaps().join(' | ') || 'none');
  document.body.setAttribute('data-measured', 'yes');
});
)js";

}  // namespace

ReportOutcome render_report(const ReportModel& m, const std::string& gnuplot) {
  const RunRecord& record = m.record;
  const RunView& host = m.host;
  Page page;
  verdict_section(page, m);
  headline_section(page, m);
  rows_section(page, m);
  trends_section(page, m);
  cases_section(page, m);
  sparse_section(page, m);
  pareto_section(page, m);
  cross_soc_section(page, m);
  metadata_section(page, m);

  const std::string title = fmt::format("kvbench run {}: suite {}", record.id, record.suite);
  std::string head = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n<meta name=\"viewport\" "
                     "content=\"width=device-width, initial-scale=1\"/>\n<title>" +
                     h(title) + "</title>\n<style>" + kStyle + "</style>\n</head>\n<body>\n<h1>" + h(title) + "</h1>\n<p>" +
                     h(fmt::format("{} ({}), git {}{}, {} cases", record.started_at, record.status, record.git_sha,
                                   record.git_dirty ? " (dirty)" : "", host.cases.size())) +
                     "</p>\n<nav><a href=\"#verdict\">verdict</a><a href=\"#headline\">headline</a>" +
                     (m.comparison ? "<a href=\"#rows\">rows</a>" : "") + "<a href=\"#trends\">trends</a><a href=\"#cases\">cases</a><a "
                     "href=\"#sparse-quality\">sparse quality</a><a href=\"#pareto\">Pareto</a><a href=\"#cross-soc\">across SoCs</a><a "
                     "href=\"#metadata\">metadata</a></nav>\n";
  const std::string tail = std::string("<script>") + kScript + "</script>\n</body>\n</html>\n";
  return page.finish(gnuplot, head, tail);
}

ReportOutcome build_report(ResultsStore& store, const ReportOptions& o) { return render_report(load_report_model(store, o), o.gnuplot); }

}  // namespace kvbench::report
