// The gate's Markdown, written to be posted as a pull-request comment: the verdict line (the
// gate's outcome), the regressed rows right under it, then one line per kind of row the gate
// left undecided with what to do about it, the caveats, and collapsed in <details> the
// configuration changes and every other row (the undecided ones first).
//
// Every string that comes from data (case, metric and suite names, config change text, notes,
// caveats) is escaped: it cannot add a table cell, HTML, a link, emphasis or a heading, and a
// line break in it shows as ⏎ instead of ending the row. The whole text stays under
// kGateMarkdownLimit bytes: rows that would not fit are left out, counted in a last line that
// points to gate.json and the HTML report. What comes first (regressions) is what stays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvbench {

// A GitHub comment holds 65,536 characters; the gate's Markdown stays below this many bytes.
inline constexpr std::size_t kGateMarkdownLimit = 60000;
// A longer string from data is cut to this many characters and ends with "…".
inline constexpr std::size_t kMarkdownFieldChars = 1000;

// Data as Markdown text: invalid UTF-8 and control characters read as U+FFFD, line breaks as ⏎,
// tabs as spaces; \ ` * _ < > [ ] # | ~ are backslash-escaped, and so are the ':' of "://" and
// the '.' of "www." (no bare-URL links).
std::string markdown_text(std::string_view text);
// Data as a code span (identifiers: case and metric names): sanitized like markdown_text, in a
// backtick fence longer than any backtick run inside. markdown_code_cell also escapes '|', which
// a table cell needs and text outside a table would show.
std::string markdown_code(std::string_view text);
std::string markdown_code_cell(std::string_view text);

// One (case, metric) row, as plain unescaped text.
struct GateMarkdownRow {
  bool regressed = false;
  bool unreliable = false;  // noise left it undecided and no CPU-time row judged it
  std::string verdict, case_name, metric, baseline, candidate, change, note;
};

// How many rows the gate left undecided, by kind, and whether they fail it.
struct GateUndecided {
  int unreliable = 0;    // nothing settled them
  int judged = 0;        // wall-time rows their CPU-time rows judged
  int inconclusive = 0;  // intervals across the band
  bool unreliable_fails = true, inconclusive_fails = false;
};

// A comparison as the Markdown needs it; the strings are plain, the renderer escapes them.
struct GateMarkdown {
  std::string outcome = "pass";  // the headline: what the gate decided ("FAIL", "UNRELIABLE", ...)
  std::int64_t candidate_run = 0, baseline_run = 0;
  std::string suite;
  std::string counts;  // "1 regressed, 0 improved, ..."
  std::vector<std::string> caveats;
  GateUndecided undecided;
  std::vector<std::pair<std::string, std::string>> config_changes;  // (case, "field: old -> new")
  std::vector<GateMarkdownRow> rows;                                // regressed first, in order
  std::vector<std::string> only_in_baseline, only_in_candidate;
};

std::string render_gate_markdown(const GateMarkdown& markdown);

}  // namespace kvbench
