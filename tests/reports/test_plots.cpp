// Every plot kind gives well-formed SVG for ordinary data, for no data and for a single point,
// drawn by the real gnuplot; its data table matches what was plotted; labels that would break a
// gnuplot script are sanitised.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <cmath>
#include <functional>

#include "html.h"
#include "plots.h"
#include "test_support.h"

using namespace kvbench::report;

namespace {

struct Kind {
  const char* name;
  std::function<Plot(int points)> make;  // points: 0 (empty), 1, or many
};

std::vector<double> ramp(int n, double scale) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(scale * (i + 1) + (i % 3));
  return v;
}

std::vector<double> steps(int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(i);
  return v;
}

std::vector<std::string> names(int n, const char* stem) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(stem + std::to_string(i));
  return v;
}

const std::vector<Kind>& kinds() {
  static const std::vector<Kind> all = {
      {"line over steps",
       [](int n) {
         return line_over_steps("levels", {"step", ""}, {"occupancy", "bytes"},
                                {{"l1", steps(n), ramp(n, 10)}, {"l2", steps(n), ramp(n, 3)}}, {{25.0, "L1 cap"}}, {{2.0, "safe->danger"}});
       }},
      {"lines over runs",
       [](int n) {
         std::vector<double> y = ramp(n, 1.0);
         if (n > 3) y[2] = NAN;  // a run without the figure
         return lines_over_runs("decode_tps over runs", {"decode_tps", "tokens/s"}, names(n, "run"), {{"rag/q4", steps(n), y}},
                                n > 0 ? std::vector<Mark>{{0.0, "baseline"}} : std::vector<Mark>{});
       }},
      {"stacked bars",
       [](int n) {
         return stacked_bars("breakdown", {"time", "ms"}, names(n, "phase"), {{"attn", ramp(n, 2)}, {"select", ramp(n, 1)}});
       }},
      {"histogram", [](int n) { return histogram("tpot", {"tpot", "ms"}, {"steps", "count"}, names(n, "b"), ramp(n, 4)); }},
      {"scatter with front",
       [](int n) {
         std::vector<ScatterPoint> pts;
         for (int i = 0; i < n; ++i) pts.push_back({100.0 / (i + 1), 0.01 * i, "p" + std::to_string(i), i % 2 == 0});
         return scatter_front("front", {"kv_bytes_per_token", "bytes"}, {"attn_rel_error", "ratio"}, pts);
       }},
      {"grouped bars",
       [](int n) {
         return grouped_bars("per SoC", {"decode_tps", "tokens/s"}, names(n, "config"), {{"host", ramp(n, 3)}, {"apple-m3", ramp(n, 5)}});
       }},
  };
  return all;
}

}  // namespace

TEST_CASE("plots: every kind draws well-formed SVG for ordinary, empty and single-point data", "[reports][plots]") {
  REQUIRE_FALSE(find_gnuplot().empty());  // ci/install-deps.sh installs gnuplot-nox
  std::vector<Plot> plots;
  std::vector<std::string> labels;
  for (const Kind& k : kinds()) {
    for (int n : {0, 1, 40}) {
      plots.push_back(k.make(n));
      labels.push_back(std::string(k.name) + ", " + std::to_string(n) + " points");
    }
  }
  std::vector<Plot*> all;
  for (Plot& p : plots) all.push_back(&p);
  const RenderOutcome outcome = render(all);
  CHECK(outcome.available);
  INFO(outcome.note);
  CHECK(outcome.note.empty());
  for (std::size_t i = 0; i < plots.size(); ++i) {
    INFO(labels[i]);
    INFO(plots[i].script);
    REQUIRE_FALSE(plots[i].svg.empty());
    CHECK(well_formed_xml(plots[i].svg));
    const std::string inlined = inline_svg(plots[i].svg, "p" + std::to_string(i) + "-", plots[i].title);
    REQUIRE_FALSE(inlined.empty());
    CHECK(inlined.find("http") == std::string::npos);
    CHECK(inlined.find("xlink") == std::string::npos);
  }
}

TEST_CASE("plots: the data table holds what is plotted", "[reports][plots]") {
  const Plot p = line_over_steps("l", {"step", ""}, {"bytes", "bytes"}, {{"l1", {0, 1, 2}, {5, 6, 7}}}, {{9.0, "cap"}});
  REQUIRE(p.data.header == std::vector<std::string>{"series", "step", "bytes (B)"});
  REQUIRE(p.data.rows.size() == 4);
  CHECK(p.data.rows[1] == std::vector<std::string>{"l1", "1", "6"});
  CHECK(p.data.rows[3] == std::vector<std::string>{"cap", "all", "9"});
  const Plot bars = grouped_bars("g", {"t", "ms"}, {"a", "b"}, {{"s1", {1.5, NAN}}});
  CHECK(bars.data.rows[1] == std::vector<std::string>{"b", "-"});
  // Units on the axes.
  CHECK(p.script.find("set ylabel \"bytes (B)\"") != std::string::npos);
}

TEST_CASE("plots: category names stand upright in lines under their bars, the table has them whole", "[reports][plots]") {
  const std::string name = "retrieval-augmented-generation-2k/int4-keys-and-values (hybrid 15%)";
  const Plot p = grouped_bars("g", {"recall", "ratio"}, {name, "rag/f16"}, {{"s", {0.9, 0.8}}});
  // Lines as wide as the slot, a remark in parentheses on its own; "%" doubled (a tic label is a format).
  CHECK(p.script.find("\"retrieval-augmented-generation-2k/int4-keys-and-values\\n(hybrid 15%%)\" 0, \"rag/f16\" 1") != std::string::npos);
  CHECK(p.script.find("rotate") == std::string::npos);
  CHECK(p.data.rows[0][0] == name);
  CHECK(p.note.empty());
  // Too many categories for their names: numbered, the key in the plot's note.
  std::vector<std::string> many;
  for (int i = 0; i < 30; ++i) many.push_back(fmt::format("model/workload-{}/policy-with-a-long-name", i));
  const Plot numbered = grouped_bars("g", {"recall", "ratio"}, many, {{"s", std::vector<double>(30, 0.5)}});
  CHECK(numbered.script.find("\"1\" 0, \"2\" 1") != std::string::npos);
  CHECK(numbered.note.find("every name starts model/") == 0);
  CHECK(numbered.note.find("1 workload-0/policy-with-a-long-name, 2 workload-1/") != std::string::npos);
}

TEST_CASE("plots: a mark without its label keeps its line and its table row", "[reports][plots]") {
  Mark quiet{2.0, "warning to danger"};
  quiet.labelled = false;
  const Plot p = line_over_steps("l", {"step", ""}, {"v", ""}, {{"s", {0, 1, 2}, {1, 2, 3}}}, {}, {{1.0, "safe to warning"}, quiet});
  CHECK(p.script.find("at first 1, graph 1 offset") != std::string::npos);  // above the frame
  CHECK(p.script.find("at first 2, graph 1 offset") == std::string::npos);
  CHECK(p.script.find("set arrow from first 2,") != std::string::npos);
  CHECK(p.data.rows.back() == std::vector<std::string>{"mark: warning to danger", "2", "-"});
}

TEST_CASE("plots: mark labels that would cover each other go in a second row, then lose their label", "[reports][plots]") {
  const std::vector<Mark> marks = {{10.0, "safe to warning"}, {11.0, "warning to danger"}, {12.0, "danger to warning"}, {90.0, "warning to safe"}};
  const Plot p = line_over_steps("l", {"step", ""}, {"v", ""}, {{"s", {0, 100}, {1, 2}}}, {}, marks);
  CHECK(p.script.find("\"safe to warning\" at first 10, graph 1 offset 0, 0.7") != std::string::npos);
  CHECK(p.script.find("\"warning to danger\" at first 11, graph 1 offset 0, 1.8") != std::string::npos);
  CHECK(p.script.find("\"danger to warning\"") == std::string::npos);
  CHECK(p.script.find("\"warning to safe\" at first 90, graph 1 offset 0, 0.7") != std::string::npos);
  CHECK(p.script.find("set tmargin 5") != std::string::npos);
  CHECK(p.data.rows.back() == std::vector<std::string>{"mark: warning to safe", "90", "-"});
}

TEST_CASE("plots: Pareto points are numbered beside them, the names in the note", "[reports][plots]") {
  const Plot p = scatter_front("f", {"kv", "bytes"}, {"err", "ratio"},
                               {{40000.0, 0.2, "q4-hybrid (30 tok/s)", true}, {130000.0, 0.001, "f16-full (26 tok/s)", true},
                                {130000.0, 0.001, "f16-window (26 tok/s)", false}});
  CHECK(p.script.find("set label \"1\" at first 39.0625") != std::string::npos);
  // The third point falls on the second: one label for both.
  CHECK(p.script.find("set label \"2,3\"") != std::string::npos);
  CHECK(p.script.find("set label \"3\"") == std::string::npos);
  CHECK(p.note == "points: 1 q4-hybrid (30 tok/s), 2 f16-full (26 tok/s), 3 f16-window (26 tok/s)");
  CHECK(p.data.rows[2] == std::vector<std::string>{"3", "f16-window (26 tok/s)", "126.953", "0.001", "no"});
}

TEST_CASE("plots: axes in the units people read, the table in the same ones", "[reports][plots]") {
  // 1.4e6 ms reads 23.3 min; 6e8 bytes 572 MiB; the cap scales with its series.
  const Plot ms = lines_over_runs("ttft", {"ttft_ms", "ms"}, {"1", "2"}, {{"c", {0, 1}, {1.4e6, 1.2e6}}});
  CHECK(ms.script.find("set ylabel \"ttft_ms (min)\"") != std::string::npos);
  CHECK(ms.data.header[2] == "ttft_ms (min)");
  CHECK(ms.data.rows[0][2] == "23.3333");
  const Plot bytes = line_over_steps("l1", {"step", ""}, {"l1", "bytes"}, {{"l1", {0, 1}, {3e8, 6e8}}}, {{6.4e8, "cap"}});
  CHECK(bytes.script.find("set ylabel \"l1 (MiB)\"") != std::string::npos);
  CHECK(bytes.data.rows[2] == std::vector<std::string>{"cap", "all", "610.352"});
  // Other units stay as they are; a negative bar is drawn below the zero line.
  const Plot headroom = grouped_bars("h", {"memory_headroom_bytes", "bytes"}, {"a", "b"}, {{"phone", {-2.0 * (1 << 30), 1.0 * (1 << 30)}}});
  CHECK(headroom.script.find("set ylabel \"memory_headroom_bytes (GiB)\"") != std::string::npos);
  CHECK(headroom.script.find("set yrange [0:*]") == std::string::npos);
  CHECK(headroom.data.rows[0] == std::vector<std::string>{"a", "-2"});
  const Plot ratio = scatter_front("f", {"kv", "bytes"}, {"recall", "ratio"}, {{40000.0, 0.9, "a", true}, {130000.0, 0.99, "b", true}});
  CHECK(ratio.script.find("set yrange [0:") != std::string::npos);  // a ratio is never drawn below zero
  CHECK(ratio.script.find("set xlabel \"kv (KiB)\"") != std::string::npos);
}

TEST_CASE("plots: labels cannot break or extend a gnuplot script", "[reports][plots]") {
  CHECK(gnuplot_text("q4\"; system(\"rm -rf /\") #") == "q4__ system(_rm -rf /_) #");
  CHECK(gnuplot_text("a\nb\\c'd") == "a_b_c_d");
  CHECK(gnuplot_text(std::string(100, 'x')).size() == 63);
  const Plot p = stacked_bars("<script>\"", {"t", "ms"}, {"x\"\ny"}, {{"s'\"", {1.0}}});
  CHECK(p.script.find('\'') == p.script.find("'-'"));  // only the data markers are quoted with '
  CHECK(p.script.find("\"x__y\"") != std::string::npos);
  CHECK(p.data.rows[0][0] == "x\"\ny");  // the table keeps the name as it is (escaped when written)
}

TEST_CASE("plots: without gnuplot every plot is left to its table, with one note", "[reports][plots]") {
  Plot q = histogram("h", {"x", ""}, {"n", "count"}, {"a", "b"}, {1, 2});
  RenderOutcome missing;
  {
    const kvtest::ScopedEnv path("PATH", "/nonexistent-kvbench-dir");
    missing = render({&q});
  }
  CHECK_FALSE(missing.available);
  CHECK(missing.note == "plots unavailable: gnuplot not found");
  CHECK(q.svg.empty());
  CHECK(q.data.rows.size() == 2);
}

TEST_CASE("plots: a gnuplot path that is not a program, or one that exits at once, leaves the plots to their tables",
          "[reports][plots]") {
  Plot q = histogram("h", {"x", ""}, {"n", "count"}, {"a", "b"}, {1, 2});
  const RenderOutcome missing = render({&q}, "/nonexistent/gnuplot");
  CHECK_FALSE(missing.available);
  CHECK(missing.note == "plots unavailable: gnuplot '/nonexistent/gnuplot' is not an executable file");
  CHECK(q.svg.empty());
  // /bin/true reads nothing and exits: more script than a pipe holds makes the writes fail
  // (EPIPE), which used to end the process with SIGPIPE.
  std::vector<std::string> bins;
  for (int i = 0; i < 200; ++i) bins.push_back(fmt::format("bin {}", i));
  const std::vector<double> counts(bins.size(), 1.0);
  std::vector<Plot> many;
  for (int i = 0; i < 200; ++i) many.push_back(histogram("h", {"x", ""}, {"n", "count"}, bins, counts));
  std::size_t script_bytes = 0;
  std::vector<Plot*> all;
  for (Plot& p : many) {
    all.push_back(&p);
    script_bytes += p.script.size();
  }
  REQUIRE(script_bytes > 256 * 1024);
  const RenderOutcome quiet = render(all, "/bin/true");
  CHECK(quiet.available);
  for (const Plot& p : many) {
    CHECK(p.svg.empty());
    CHECK(p.error == "gnuplot did not draw this plot");
  }
}
