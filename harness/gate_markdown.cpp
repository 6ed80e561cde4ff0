#include "gate_markdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace kvbench {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr std::string_view kLineBreak = "\xE2\x8F\x8E";    // U+23CE, ⏎
constexpr std::string_view kEllipsis = "\xE2\x80\xA6";     // U+2026, …
// What the closing lines need beyond the budget of the rows: section ends, </details> and the
// left-out line.
constexpr std::size_t kTailReserve = 512;

// Regressed rows shown as a table under the headline; more than this and the first screen (about
// 40 lines) would not hold them all, so they come one line per case first.
constexpr std::size_t kRegressionTableRows = 30;

constexpr std::string_view kTableHead =
    "| verdict | case | metric | baseline | candidate | change | note |\n|---|---|---|---|---|---|---|\n";

// The length of the well-formed UTF-8 sequence at s[i]; 0 when it is not one.
std::size_t utf8_length(std::string_view s, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  std::size_t n = 0;
  unsigned char low = 0x80, high = 0xBF;  // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) low = 0xA0;   // no overlong forms
    if (lead == 0xED) high = 0x9F;  // no surrogates
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) low = 0x90;
    if (lead == 0xF4) high = 0x8F;  // nothing beyond U+10FFFF
  } else {
    return 0;
  }
  if (i + n > s.size() || byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  return n;
}

// Characters that change how text around them reads: C0 and C1 controls, DEL, and the
// bidirectional embeddings, overrides and isolates.
bool is_control(std::string_view cp) {
  const auto b0 = static_cast<unsigned char>(cp[0]);
  if (cp.size() == 1) return b0 < 0x20 || b0 == 0x7F;
  if (cp.size() == 2) return b0 == 0xC2 && static_cast<unsigned char>(cp[1]) < 0xA0;
  if (cp.size() != 3 || b0 != 0xE2) return false;
  const auto b1 = static_cast<unsigned char>(cp[1]), b2 = static_cast<unsigned char>(cp[2]);
  return (b1 == 0x80 && b2 >= 0xAA && b2 <= 0xAE) || (b1 == 0x81 && b2 >= 0xA6 && b2 <= 0xA9);
}

// Valid UTF-8 on one line, at most kMarkdownFieldChars characters.
std::string sanitized(std::string_view s) {
  std::string out;
  std::size_t chars = 0;
  for (std::size_t i = 0; i < s.size(); ++chars) {
    if (chars == kMarkdownFieldChars) {
      out += kEllipsis;
      break;
    }
    const std::size_t n = utf8_length(s, i);
    if (n == 0) {
      out += kReplacement;
      ++i;
      continue;
    }
    const std::string_view cp = s.substr(i, n);
    i += n;
    if (cp == "\r" && i < s.size() && s[i] == '\n') ++i;  // CRLF: one break
    if (cp == "\n" || cp == "\r" || cp == "\u2028" || cp == "\u2029") {
      out += kLineBreak;
    } else if (cp == "\t") {
      out += ' ';
    } else if (is_control(cp)) {
      out += kReplacement;
    } else {
      out += cp;
    }
  }
  return out;
}

bool equals_ignoring_case(std::string_view a, std::string_view lower) {
  return a.size() == lower.size() &&
         std::equal(a.begin(), a.end(), lower.begin(), [](char x, char y) { return (x >= 'A' && x <= 'Z' ? x - 'A' + 'a' : x) == y; });
}

// `content` (sanitized) in a backtick fence longer than any backtick run inside it, padded with
// a space where a backtick or a space at its ends would otherwise be taken away.
std::string code_span(const std::string& content) {
  if (content.empty()) return "";
  std::size_t longest = 0, run = 0;
  for (char ch : content) {
    run = ch == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  const std::string fence(longest + 1, '`');
  const bool pad = content.front() == '`' || content.back() == '`' || (content.front() == ' ' && content.back() == ' ');
  const std::string space = pad ? " " : "";
  return fence + space + content + space + fence;
}

std::string row_markdown(const GateMarkdownRow& r) {
  return fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", markdown_text(r.verdict), markdown_code_cell(r.case_name), markdown_code_cell(r.metric),
                     markdown_text(r.baseline), markdown_text(r.candidate), markdown_text(r.change), markdown_text(r.note));
}

struct LeftOut {
  std::size_t rows = 0, changes = 0, other = 0;
};

// The comment, appended to while the budget lasts. Once one piece did not fit nothing more is
// appended, so what is shown is always a prefix of the full text.
class Comment {
 public:
  explicit Comment(std::string head) : out_(std::move(head)) {}
  // `prefix` (a section's head; "" once it is open) and `item` together, or neither; counts
  // into `left_out` what was not appended.
  bool append(std::string_view prefix, std::string_view item, std::size_t& left_out) {
    if (stopped_ || out_.size() + prefix.size() + item.size() > kGateMarkdownLimit - kTailReserve) {
      stopped_ = true;
      ++left_out;
      return false;
    }
    out_.append(prefix).append(item);
    return true;
  }
  // A section's end or the left-out line: within kTailReserve.
  void close(std::string_view text) { out_.append(text); }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
  bool stopped_ = false;
};

// Every regressed row, in a table opened by `head` and closed by `tail` (neither when none fits).
void write_regressed_table(const GateMarkdown& m, const std::string& head, std::string_view tail, Comment& comment, LeftOut& left) {
  bool open = false;
  for (const GateMarkdownRow& row : m.rows) {
    if (row.regressed) open |= comment.append(open ? "" : head, row_markdown(row), left.rows);
  }
  if (open) comment.close(tail);
}

// The change without its interval and p ("-17.2%" of "-17.2% [-20.1%, -14.2%] p=0.0015").
std::string short_change(const std::string& change) { return change.substr(0, change.find(' ')); }

// More regressed rows than a first screen holds as a table: one line per case, every regressed
// metric on it with its change, then the rows in full, collapsed.
void write_regressions_by_case(const GateMarkdown& m, std::size_t regressed, Comment& comment, LeftOut& left) {
  std::vector<std::string> cases;
  std::map<std::string, std::string> metrics;  // case -> "`metric` change, ..."
  for (const GateMarkdownRow& row : m.rows) {
    if (!row.regressed) continue;
    std::string& line = metrics[row.case_name];
    if (line.empty()) cases.push_back(row.case_name);
    line += (line.empty() ? "" : ", ") + markdown_code(row.metric) + " " + markdown_text(short_change(row.change));
  }
  const std::string head = fmt::format("### Regressions ({} in {} case{})\n", regressed, cases.size(), cases.size() == 1 ? "" : "s");
  bool open = false;
  for (const std::string& name : cases) open |= comment.append(open ? "" : head, "- " + markdown_code(name) + ": " + metrics[name] + "\n", left.other);
  if (open) comment.close("\n");
  write_regressed_table(m, fmt::format("<details><summary>Regressions, row by row ({})</summary>\n\n", regressed) + std::string(kTableHead),
                        "\n</details>\n\n", comment, left);
}

// The regressed rows, right under the headline: the first screen holds them.
void write_regressions(const GateMarkdown& m, Comment& comment, LeftOut& left) {
  const auto regressed = static_cast<std::size_t>(std::count_if(m.rows.begin(), m.rows.end(), [](const GateMarkdownRow& r) { return r.regressed; }));
  if (regressed > kRegressionTableRows) return write_regressions_by_case(m, regressed, comment, left);
  write_regressed_table(m, fmt::format("### Regressions ({})\n", regressed) + std::string(kTableHead), "\n", comment, left);
}

// One line per kind of undecided row, with what to do about it.
void write_undecided(const GateMarkdown& m, Comment& comment, LeftOut& left) {
  const GateUndecided& u = m.undecided;
  const auto rows = [](int n) { return fmt::format("{} row{}", n, n == 1 ? "" : "s"); };
  std::vector<std::string> lines;
  if (u.unreliable > 0) {
    lines.push_back(fmt::format("**{} unreliable**{}: noise or too few repetitions left them undecided and no CPU-time row settled "
                                "them. Rerun on a quiet runner or with more repetitions; the sim clock (`kvbench run --sim`) counts "
                                "the work a busy runner cannot time.",
                                rows(u.unreliable), u.unreliable_fails ? " (they fail the gate; `--unreliable=pass` passes them)" : " (passed by `--unreliable=pass`)"));
  }
  if (u.judged > 0) {
    lines.push_back(fmt::format("**{} judged by CPU time**: noise left their wall time undecided and their CPU-time rows decided; a "
                                "quiet run gates the wall time.",
                                rows(u.judged)));
  }
  if (u.inconclusive > 0) {
    lines.push_back(fmt::format("**{} inconclusive**{}: their intervals cross the threshold band; each row says how many repetitions "
                                "would settle it.",
                                rows(u.inconclusive), u.inconclusive_fails ? " (they fail the gate: `--inconclusive=fail`)" : ""));
  }
  bool open = false;
  for (const std::string& line : lines) open |= comment.append(open ? "" : "### Undecided\n", "- " + line + "\n", left.other);
  if (open) comment.close("\n");
}

void write_config_changes(const GateMarkdown& m, Comment& comment, LeftOut& left) {
  const std::string details = fmt::format("<details><summary>Config changes ({})</summary>\n\n", m.config_changes.size());
  bool open = false;
  for (const auto& [name, change] : m.config_changes) {
    const std::string line = "- config changed: " + markdown_code(name) + ": " + markdown_text(change) + "\n";
    open |= comment.append(open ? "" : details, line, left.changes);
  }
  if (open) comment.close("\n</details>\n\n");
}

// Every other row (the undecided ones first) and the cases found in one run only, collapsed.
void write_other_rows(const GateMarkdown& m, Comment& comment, LeftOut& left) {
  const auto others = std::count_if(m.rows.begin(), m.rows.end(), [](const GateMarkdownRow& r) { return !r.regressed; });
  const std::string details = fmt::format("<details><summary>Every other row ({})</summary>\n\n", others);
  bool in_details = false, in_table = false;
  for (const bool undecided : {true, false}) {
    for (const GateMarkdownRow& row : m.rows) {
      if (row.regressed || row.unreliable != undecided) continue;
      const std::string prefix = (in_details ? "" : details) + std::string(in_table ? "" : kTableHead);
      if (comment.append(prefix, row_markdown(row), left.rows)) in_details = in_table = true;
    }
  }
  for (const auto& [names, where] : {std::pair{&m.only_in_baseline, "baseline"}, std::pair{&m.only_in_candidate, "candidate"}}) {
    for (const std::string& name : *names) {
      in_details |= comment.append(in_details ? "" : details, fmt::format("\nonly in the {}: {}\n", where, markdown_code(name)), left.other);
    }
  }
  if (in_details) comment.close("\n</details>\n");
}

std::string left_out_line(const LeftOut& left, const GateMarkdown& m) {
  std::string what;
  const auto add = [&](std::size_t count, const std::string& text) {
    if (count == 0) return;
    what += (what.empty() ? "" : ", ") + text;
  };
  add(left.rows, fmt::format("{} of {} rows", left.rows, m.rows.size()));
  add(left.changes, fmt::format("{} of {} config changes", left.changes, m.config_changes.size()));
  add(left.other, fmt::format("{} other lines (caveats, cases in one run only)", left.other));
  return fmt::format("\n**Cut to fit a pull-request comment:** {} left out. The full comparison is in gate.json and in the HTML "
                     "report (report/index.html).\n",
                     what);
}

}  // namespace

std::string markdown_text(std::string_view text) {
  const std::string clean = sanitized(text);
  std::string out;
  out.reserve(clean.size());
  for (std::size_t i = 0; i < clean.size(); ++i) {
    const char ch = clean[i];
    const bool markup = std::string_view("\\`*_<>[]#|~").find(ch) != std::string_view::npos;
    const bool url_colon = ch == ':' && clean.compare(i + 1, 2, "//") == 0;
    const bool www_dot = ch == '.' && i >= 3 && equals_ignoring_case(std::string_view(clean).substr(i - 3, 3), "www");
    if (markup || url_colon || www_dot) out += '\\';
    out += ch;
  }
  return out;
}

std::string markdown_code(std::string_view text) { return code_span(sanitized(text)); }

std::string markdown_code_cell(std::string_view text) {
  std::string escaped;
  for (char ch : sanitized(text)) {
    if (ch == '|') escaped += '\\';
    escaped += ch;
  }
  return code_span(escaped);
}

std::string render_gate_markdown(const GateMarkdown& m) {
  Comment comment(fmt::format("**kvbench gate: {}** — candidate run {} against baseline run {} (suite {}): {}\n\n", markdown_text(m.outcome),
                              m.candidate_run, m.baseline_run, markdown_text(m.suite), markdown_text(m.counts)));
  LeftOut left;
  write_regressions(m, comment, left);
  write_undecided(m, comment, left);
  for (const std::string& caveat : m.caveats) comment.append("", "> caveat: " + markdown_text(caveat) + "\n\n", left.other);
  write_config_changes(m, comment, left);
  write_other_rows(m, comment, left);
  if (left.rows + left.changes + left.other > 0) comment.close(left_out_line(left, m));
  return comment.take();
}

}  // namespace kvbench
