// The gate's Markdown (a PR comment): names from data stay inside their cell and carry no HTML,
// links or markup; configuration changes and regressions come before every other row; a large
// comparison is cut under the limit and says how much it left out.
#include <catch2/catch.hpp>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "compare_command.h"
#include "gate_markdown.h"
#include "test_support.h"

using namespace kvbench;

using kvtest::lines_of;

namespace {

// The `|` a GFM table splits a row on: those not escaped with a backslash.
int unescaped_pipes(const std::string& line) {
  int n = 0;
  for (std::size_t i = 0; i < line.size(); ++i) n += line[i] == '|' && (i == 0 || line[i - 1] != '\\');
  return n;
}

// The line with its code spans taken out (CommonMark: a run of n backticks up to the next run
// of exactly n; an unmatched run is literal and stays).
std::string without_code_spans(const std::string& line) {
  std::string out;
  for (std::size_t i = 0; i < line.size();) {
    if (line[i] != '`') {
      out += line[i++];
      continue;
    }
    const std::size_t run = line.find_first_not_of('`', i) == std::string::npos ? line.size() - i : line.find_first_not_of('`', i) - i;
    std::size_t close = std::string::npos;
    for (std::size_t j = i + run; j < line.size();) {
      if (line[j] != '`') {
        ++j;
        continue;
      }
      const std::size_t end = line.find_first_not_of('`', j) == std::string::npos ? line.size() : line.find_first_not_of('`', j);
      if (end - j == run) {
        close = end;
        break;
      }
      j = end;
    }
    if (close == std::string::npos) {
      out.append(line, i, run);
      i += run;
    } else {
      i = close;
    }
  }
  return out;
}

// Outside code spans, every Markdown-active character is escaped.
bool markup_escaped(const std::string& text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (std::string("`*_<>[]#|~").find(text[i]) == std::string::npos) continue;
    if (i == 0 || text[i - 1] != '\\') return false;
  }
  return true;
}

MetricComparison row(const std::string& metric, Verdict verdict, const std::string& note = "") {
  MetricComparison m;
  m.metric = metric;
  m.verdict = verdict;
  m.baseline_median = 10.0;
  m.candidate_median = verdict == Verdict::Regressed ? 12.0 : 10.0;
  m.ratio = *m.candidate_median / *m.baseline_median;
  m.note = note;
  return m;
}

RunComparison comparison(const std::string& suite) {
  RunComparison c;
  c.baseline.id = 1;
  c.candidate.id = 2;
  c.baseline.suite = c.candidate.suite = suite;
  return c;
}

// Table rows, less the head and separator lines.
std::size_t table_rows(const std::string& md) {
  std::size_t rows = 0;
  for (const std::string& line : lines_of(md)) rows += line.rfind("| ", 0) == 0 && line.rfind("| verdict |", 0) != 0;
  return rows;
}

constexpr char kBinaryBytes[] = "nul\0bell\x07 tab\there \xff\xfe bad utf8";
const std::string kBinary(kBinaryBytes, sizeof kBinaryBytes - 1);

const std::vector<std::string> kPathological = {
    "syn-7b/a|b/c|d/host",
    "line one\nline two\r\nline three\rfour",
    "tick ` and ``double`` and `",
    "<script>alert(1)</script>",
    std::string(300, 'x') + "|" + std::string(10, 'y'),
    "[click](https://evil.example) ![img](x.png) www.evil.example",
    "**bold** _em_ # heading ~strike~ \\|",
    "`",
    " spaced ",
    kBinary,
};

}  // namespace

TEST_CASE("markdown_text escapes markup and keeps every string on one line", "[gate-markdown]") {
  CHECK(markdown_text("a|b") == "a\\|b");
  CHECK(markdown_text("<b>[x](y)</b>") == "\\<b\\>\\[x\\](y)\\</b\\>");
  CHECK(markdown_text("*_#`~\\") == "\\*\\_\\#\\`\\~\\\\");
  CHECK(markdown_text("one\ntwo\r\nthree") == "one\u23CEtwo\u23CEthree");
  CHECK(markdown_text("tab\tend") == "tab end");
  CHECK(markdown_text(std::string("a\x01" "b\x7f", 4)) == "a\uFFFDb\uFFFD");
  CHECK(markdown_text("\xC0\xAF") == "\uFFFD\uFFFD");                // an overlong '/'
  CHECK(markdown_text("r\u202Eevil") == "r\uFFFDevil");              // a bidi override
  CHECK(markdown_text("https://x.example and www.y.example") == "https\\://x.example and www\\.y.example");
  CHECK(markdown_text("policies.sparse.budget: 0.25 -> 0.1") == "policies.sparse.budget: 0.25 -\\> 0.1");
  CHECK(markdown_text("größe") == "größe");
  const std::string long_name(kMarkdownFieldChars + 5, 'n');
  CHECK(markdown_text(long_name) == std::string(kMarkdownFieldChars, 'n') + "\u2026");
  CHECK(markdown_text(std::string(300, 'n')) == std::string(300, 'n'));
}

TEST_CASE("markdown_code fences any backticks and a cell escapes its pipes", "[gate-markdown]") {
  CHECK(markdown_code("decode_tps") == "`decode_tps`");
  CHECK(markdown_code("a`b") == "``a`b``");
  CHECK(markdown_code("`a") == "`` `a ``");
  CHECK(markdown_code("a``b`") == "``` a``b` ```");
  CHECK(markdown_code("x\ny") == "`x\u23CEy`");
  CHECK(markdown_code("a|b") == "`a|b`");
  CHECK(markdown_code_cell("a|b") == "`a\\|b`");
  CHECK(markdown_code("") == "");
}

TEST_CASE("pathological names stay inside their cell, with no HTML, link or markup", "[gate-markdown]") {
  RunComparison c = comparison("suite|<b>with\nnewline</b>");
  c.caveats.push_back("a caveat with | and <img src=x>");
  int rows = 0;
  for (const std::string& name : kPathological) {
    CaseComparison k;
    k.name = name;
    k.config_changes.push_back("policies.note: \"" + name + "\" -> \"b\"");
    k.rows.push_back(row(name, Verdict::Regressed, name));
    k.rows.push_back(row("decode_tps", Verdict::Improved, "note | with " + name));
    k.rows.push_back(row(name, Verdict::Unchanged));
    rows += 3;
    c.cases.push_back(k);
  }
  c.only_in_baseline.push_back("gone|`case`\n<b>");
  const std::string md = comparison_markdown(comparison_record(c));
  INFO(md);
  const std::vector<std::string> lines = lines_of(md);
  const std::string header = "| verdict | case | metric | baseline | candidate | change | note |";
  REQUIRE(md.find(header) != std::string::npos);
  CHECK(table_rows(md) == static_cast<std::size_t>(rows));
  for (const std::string& line : lines) {
    CAPTURE(line);
    if (line.rfind("|", 0) == 0) CHECK(unescaped_pipes(line) == unescaped_pipes(header));
    // Our own tags are the only HTML; outside code spans every markup character is escaped.
    if (line.rfind("<details><summary>Every other row (", 0) == 0 || line.rfind("<details><summary>Config changes (", 0) == 0 ||
        line == "</details>") {
      continue;
    }
    std::string text = without_code_spans(line);
    for (const char* ours : {"**kvbench gate: FAIL**", "### Undecided", "### Regressions", "> caveat: ", "|---|---|---|---|---|---|---|"}) {
      if (text.rfind(ours, 0) == 0) text.erase(0, std::string(ours).size());
    }
    if (line.rfind("| ", 0) == 0) {  // the row's own separators are the unescaped pipes counted above
      std::string cells;
      for (std::size_t i = 0; i < text.size(); ++i) {
        if (!(text[i] == '|' && (i == 0 || text[i - 1] != '\\'))) cells += text[i];
      }
      text = cells;
    }
    CHECK(markup_escaped(text));
  }
  // A 300-character name is whole, in its cell.
  CHECK(md.find("| `" + std::string(300, 'x') + "\\|" + std::string(10, 'y') + "` |") != std::string::npos);
  CHECK(md.find("line one\u23CEline two\u23CEline three\u23CEfour") != std::string::npos);
  for (std::size_t at = md.find("<script"); at != std::string::npos; at = md.find("<script", at + 1)) {
    CHECK((md[at - 1] == '`' || md[at - 1] == '\\'));  // in a code span, or escaped
  }
}

TEST_CASE("regressions right under the headline, a line per kind of undecided row, then the rest collapsed", "[gate-markdown]") {
  RunComparison c = comparison("nightly");
  CaseComparison a, b;
  a.name = "syn-7b/rag-2k/q4-hybrid/host";
  a.rows = {row("decode_tps", Verdict::Improved), row("tpot_ms_p50", Verdict::Inconclusive), row("token_drop_ratio", Verdict::Regressed)};
  b.name = "syn-7b/codebase-8k/q4-hybrid/host";
  b.config_changes = {"policies.sparse.budget: 0.25 -> 0.1"};
  b.rows = {row("noise_cpu_share", Verdict::NotGated), row("attn_mass_recall", Verdict::Regressed)};
  c.cases = {a, b};
  const std::string md = comparison_markdown(comparison_record(c));
  INFO(md);
  CHECK(md.rfind("**kvbench gate: FAIL** — candidate run 2 against baseline run 1 (suite nightly): 2 regressed", 0) == 0);
  const std::size_t regressions = md.find("\n\n### Regressions (2)\n| verdict |");
  const std::size_t undecided = md.find("### Undecided\n- **1 row inconclusive**: their intervals cross the threshold band");
  const std::size_t changes = md.find("<details><summary>Config changes (1)</summary>\n\n- config changed: `syn-7b/codebase-8k/q4-hybrid/host`: "
                                      "policies.sparse.budget: 0.25 -\\> 0.1\n");
  const std::size_t details = md.find("<details><summary>Every other row (3)</summary>");
  REQUIRE(regressions != std::string::npos);
  REQUIRE(undecided != std::string::npos);
  REQUIRE(changes != std::string::npos);
  REQUIRE(details != std::string::npos);
  CHECK(md.find('\n') == regressions);  // the table starts on the third line
  CHECK(regressions < undecided);
  CHECK(undecided < changes);
  CHECK(changes < details);
  for (const char* metric : {"`token_drop_ratio`", "`attn_mass_recall`"}) {
    CAPTURE(metric);
    CHECK(md.find(metric) > regressions);
    CHECK(md.find(metric) < undecided);
  }
  for (const char* metric : {"`decode_tps`", "`tpot_ms_p50`", "`noise_cpu_share`"}) {
    CAPTURE(metric);
    CHECK(md.find(metric) > details);
  }
  // Improved before inconclusive before not gated, as before.
  CHECK(md.find("`decode_tps`") < md.find("`tpot_ms_p50`"));
  CHECK(md.find("`tpot_ms_p50`") < md.find("`noise_cpu_share`"));
  CHECK(md.find("Cut to fit") == std::string::npos);
  CHECK(md.substr(md.size() - 11) == "</details>\n");
}

TEST_CASE("a comparison of 2,000 rows is cut under the limit and counts what it left out", "[gate-markdown]") {
  RunComparison c = comparison("nightly");
  for (int k = 0; k < 200; ++k) {
    CaseComparison cc;
    cc.name = "syn-7b/codebase-" + std::to_string(k) + "k/q4-hybrid-budget-0.25/snapdragon-8-gen-3";
    for (int m = 0; m < 10; ++m) cc.rows.push_back(row("span_decode_attn_compute_ms_" + std::to_string(m), k % 20 == 0 && m == 0 ? Verdict::Regressed : Verdict::Unchanged));
    c.cases.push_back(cc);
  }
  const std::string md = comparison_markdown(comparison_record(c));
  CHECK(md.size() < kGateMarkdownLimit);
  std::smatch match;
  REQUIRE(std::regex_search(md, match, std::regex(R"(\*\*Cut to fit a pull-request comment:\*\* (\d+) of 2000 rows left out\. The full comparison is in gate\.json and in the HTML report \(report/index\.html\)\.\n$)")));
  const std::size_t left_out = std::stoul(match[1].str());
  CHECK(left_out > 0);
  CHECK(table_rows(md) + left_out == 2000);
  // Every regression survives: they come first.
  std::size_t regressed = 0;
  for (const std::string& line : lines_of(md)) regressed += line.rfind("| regressed |", 0) == 0;
  CHECK(regressed == 10);
  CHECK(md.find("</details>\n\n**Cut to fit") != std::string::npos);
}

TEST_CASE("regressions beyond the limit are cut too, and counted, with the config changes after them", "[gate-markdown]") {
  // 1500 cases, each with a regression, an unchanged row and a config change.
  RunComparison c = comparison("nightly");
  for (int k = 0; k < 1500; ++k) {
    CaseComparison cc;
    cc.name = "case-" + std::to_string(k);
    cc.config_changes.push_back("policies.sparse.budget: 0.25 -> 0.1");
    cc.rows = {row("token_drop_ratio", Verdict::Regressed), row("decode_tps", Verdict::Unchanged)};
    c.cases.push_back(cc);
  }
  const std::string md = comparison_markdown(comparison_record(c));
  CHECK(md.size() < kGateMarkdownLimit);
  std::smatch match;
  // Past 30 regressions they come a line per case; the rows in full and the config changes
  // come after them, past the cut.
  REQUIRE(std::regex_search(md, match, std::regex(R"(\*\*Cut to fit a pull-request comment:\*\* 3000 of 3000 rows, 1500 of 1500 config changes, (\d+) other lines \(caveats, cases in one run only\) left out\.)")));
  std::size_t shown = 0;
  for (const std::string& line : lines_of(md)) shown += line.rfind("- `case-", 0) == 0 && line.find(": `token_drop_ratio` +20.0%") != std::string::npos;
  CHECK(md.find("### Regressions (1500 in 1500 cases)\n- `case-0`: `token_drop_ratio` +20.0%\n") != std::string::npos);
  CHECK(shown > 0);
  CHECK(shown + std::stoul(match[1].str()) == 1500);
  CHECK(table_rows(md) == 0);
  CHECK(md.find("config changed") == std::string::npos);
  CHECK(md.find("<details>") == std::string::npos);
}

TEST_CASE("more regressions than a first screen holds as a table come a line per case: the first 40 lines hold every one", "[gate-markdown]") {
  // The smoke suite's shape: 8 cases, 9 regressed rows each.
  RunComparison c = comparison("smoke");
  for (int k = 0; k < 8; ++k) {
    CaseComparison cc;
    cc.name = "syn-7b/workload-" + std::to_string(k) + "/q4-hybrid-tight/host";
    for (int m = 0; m < 9; ++m) cc.rows.push_back(row("metric_" + std::to_string(m), Verdict::Regressed));
    for (int m = 0; m < 40; ++m) cc.rows.push_back(row("unchanged_" + std::to_string(m), Verdict::Unchanged));
    c.cases.push_back(cc);
  }
  const std::string md = comparison_markdown(comparison_record(c));
  INFO(md.substr(0, 3000));
  const std::vector<std::string> lines = lines_of(md);
  REQUIRE(lines.size() > 40);
  std::string first;
  for (std::size_t i = 0; i < 40; ++i) first += lines[i] + "\n";
  CHECK(first.find("### Regressions (72 in 8 cases)\n") != std::string::npos);
  for (int k = 0; k < 8; ++k) {
    const std::string line = "- `syn-7b/workload-" + std::to_string(k) + "/q4-hybrid-tight/host`: ";
    const std::size_t at = first.find(line);
    REQUIRE(at != std::string::npos);
    const std::string listed = first.substr(at, first.find('\n', at) - at);
    for (int m = 0; m < 9; ++m) CHECK(listed.find("`metric_" + std::to_string(m) + "` +20.0%") != std::string::npos);
  }
  // Then every regressed row in full, collapsed, before the rest.
  const std::size_t full = md.find("<details><summary>Regressions, row by row (72)</summary>");
  REQUIRE(full != std::string::npos);
  CHECK(full < md.find("<details><summary>Every other row (320)</summary>"));
  std::size_t rows = 0;
  for (const std::string& line : lines) rows += line.rfind("| regressed |", 0) == 0;
  CHECK(rows == 72);
  CHECK(md.find("Cut to fit") == std::string::npos);
}

TEST_CASE("the headline follows the gate's outcome, undecided rows are a line each, listed first among the rest", "[gate-markdown]") {
  RunComparison c = comparison("nightly");
  CaseComparison a;
  a.name = "syn-7b/rag-2k/q4-hybrid/host";
  MetricComparison judged = row("decode_tps", Verdict::Unreliable);
  judged.judged_by = "span_decode_total_cpu_ms";
  judged.judged_verdict = Verdict::Unchanged;
  a.rows = {row("span_decode_dma_wait_ms", Verdict::Unreliable), judged, row("tpot_ms_p50", Verdict::Inconclusive),
            row("kv_bytes_per_token", Verdict::Unchanged)};
  c.cases = {a};
  std::string md = comparison_markdown(comparison_record(c));
  INFO(md);
  CHECK(md.rfind("**kvbench gate: UNRELIABLE** —", 0) == 0);
  CHECK(md.find("### Regressions") == std::string::npos);
  const std::size_t undecided = md.find("### Undecided\n");
  REQUIRE(undecided != std::string::npos);
  CHECK(md.find("- **1 row unreliable** (they fail the gate; `--unreliable=pass` passes them): noise or too few repetitions") > undecided);
  CHECK(md.find("- **1 row judged by CPU time**: noise left their wall time undecided") > undecided);
  CHECK(md.find("- **1 row inconclusive**: their intervals cross") > undecided);
  const std::size_t details = md.find("<details><summary>Every other row (4)</summary>");
  REQUIRE(details != std::string::npos);
  // Among the rest, the unreliable row first.
  CHECK(md.find("`span_decode_dma_wait_ms`") > details);
  CHECK(md.find("`span_decode_dma_wait_ms`") < md.find("`kv_bytes_per_token`"));
  CHECK(md.find("`span_decode_dma_wait_ms`") < md.find("`decode_tps`"));
  const std::string passed = comparison_markdown(comparison_record(c), GateStrictness{false, false});
  CHECK(passed.rfind("**kvbench gate: pass (unreliable rows passed by --unreliable=pass)**", 0) == 0);
  CHECK(passed.find("- **1 row unreliable** (passed by `--unreliable=pass`)") != std::string::npos);
  c.cases[0].rows.erase(c.cases[0].rows.begin());
  CHECK(comparison_markdown(comparison_record(c)).rfind("**kvbench gate: pass (with inconclusive rows)**", 0) == 0);
  c.definition_change = std::pair{1, 2};
  CHECK(comparison_markdown(comparison_record(c)).rfind("**kvbench gate: needs a baseline**", 0) == 0);
}
