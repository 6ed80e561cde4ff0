#include "plots.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <gnuplot-iostream.h>
#include <numeric>
#include <sstream>

#include "human_units.h"

namespace kvbench::report {

namespace {

namespace fs = std::filesystem;

// Colours that also differ in lightness; dash patterns, markers and fills differ too.
constexpr const char* kColours[] = {"#1f4e8c", "#b03a2e", "#1e8449", "#7d3c98", "#b9770e", "#424949", "#148f77", "#6e2c00"};
constexpr int kPatterns[] = {3, 1, 4, 5, 2, 6, 7, 0};
constexpr std::size_t kStyles = 8;

const char* colour(std::size_t i) { return kColours[i % kStyles]; }
int pattern(std::size_t i) { return kPatterns[i % kStyles]; }

std::string quoted(const std::string& text) { return "\"" + gnuplot_text(text) + "\""; }

std::string axis_text(const Axis& a) { return a.unit.empty() ? a.label : a.label + " (" + a.unit + ")"; }

// Axes in the units people read (the summary's: 1.4e+06 ms is 23.3 min, 6e+08 bytes 572 MiB):
// the values are divided by the unit the largest magnitude reads best in, and the axis and the
// data table name that unit.
double largest_of(const std::vector<double>& values, double so_far = 0.0) {
  for (double v : values) {
    if (std::isfinite(v)) so_far = std::max(so_far, std::fabs(v));
  }
  return so_far;
}

Axis human_axis(const Axis& axis, double largest, double& divisor) {
  const UnitScale scale = human_scale(axis.unit, largest);
  divisor = scale.divisor;
  return Axis{axis.label, scale.unit};
}

void divide(std::vector<double>& values, double divisor) {
  if (divisor == 1.0) return;
  for (double& v : values) v /= divisor;
}

std::string number(double v) {
  if (!std::isfinite(v)) return "NaN";
  return fmt::format("{:.9g}", v);
}

std::string cell(double v) {
  if (!std::isfinite(v)) return "-";
  return fmt::format("{:.6g}", v);
}

std::string header(const std::string& title, const Axis* x, const Axis* y) {
  std::string s = "set title " + quoted(title) + "\n";
  if (x != nullptr) s += "set xlabel " + quoted(axis_text(*x)) + "\n";
  if (y != nullptr) s += "set ylabel " + quoted(axis_text(*y)) + "\n";
  s += "set grid lc rgb \"#dddddd\"\nset key below box lc rgb \"#bbbbbb\" height 1\nset xlabel offset 0, 0.4\nset border lc rgb \"#555555\"\n";
  return s;
}

// An empty frame saying so: gnuplot refuses to plot nothing.
std::string no_data() {
  return "set xrange [0:1]\nset yrange [0:1]\nunset xtics\nunset ytics\nset label \"no data\" at graph 0.5, graph 0.5 center\n"
         "plot 2 notitle\n";
}

// A category under its bar: a long one keeps its start and its end (where a policy's name and
// budget are) so the chart keeps its height; the data table has it whole.
std::string tick_text(const std::string& text) {
  constexpr std::size_t kHead = 12, kTail = 16;
  if (text.size() <= kHead + kTail + 3) return text;
  return text.substr(0, kHead) + "..." + text.substr(text.size() - kTail);
}

// A dashed line per mark; its label sits above the frame, clear of the data it marks.
std::string mark_commands(const std::vector<Mark>& marks) {
  std::string s;
  bool labels = false;
  for (const Mark& m : marks) {
    s += fmt::format("set arrow from first {0}, graph 0 to first {0}, graph 1 nohead dt 4 lw 1 lc rgb \"#777777\"\n", number(m.x));
    if (!m.labelled) continue;
    s += fmt::format("set label {} at first {}, graph 1 offset 0, 0.7 center font \",8\" tc rgb \"#555555\"\n", quoted(m.label),
                     number(m.x));
    labels = true;
  }
  if (labels) s += "set tmargin 4\n";
  return s;
}

std::string lines_plot(const std::vector<Series>& series) {
  std::string cmd = "plot ", data;
  bool any = false;
  for (std::size_t i = 0; i < series.size(); ++i) {
    const Series& s = series[i];
    if (s.x.empty()) continue;
    const std::size_t every = std::max<std::size_t>(1, s.x.size() / 10);
    cmd += fmt::format("{}'-' using 1:2 with linespoints dt {} pt {} pi {} ps 0.7 lw 1.6 lc rgb \"{}\" title {}", any ? ", " : "", i % 5 + 1,
                       i % 12 + 1, every, colour(i), quoted(s.name));
    for (std::size_t k = 0; k < s.x.size() && k < s.y.size(); ++k) data += number(s.x[k]) + " " + number(s.y[k]) + "\n";
    data += "e\n";
    any = true;
  }
  if (!any) return no_data();
  return cmd + "\n" + data;
}

std::string bars_plot(const std::vector<std::string>& categories, const std::vector<Bars>& series) {
  std::string cmd = "plot ", data;
  for (std::size_t i = 0; i < series.size(); ++i) {
    cmd += fmt::format("{}'-' using 2{} title {} fs pattern {} border lc rgb \"{}\" lc rgb \"{}\"", i == 0 ? "" : ", ",
                       i == 0 ? ":xtic(1)" : "", quoted(series[i].name), pattern(i), colour(i), colour(i));
    for (std::size_t c = 0; c < categories.size(); ++c) {
      const double v = c < series[i].values.size() && std::isfinite(series[i].values[c]) ? series[i].values[c] : 0.0;
      data += quoted(tick_text(categories[c])) + " " + number(v) + "\n";
    }
    data += "e\n";
  }
  return cmd + "\n" + data;
}

DataTable bars_table(const std::string& first, const std::vector<std::string>& categories, const std::vector<Bars>& series) {
  DataTable t;
  t.header.push_back(first);
  for (const Bars& b : series) t.header.push_back(b.name);
  for (std::size_t c = 0; c < categories.size(); ++c) {
    std::vector<std::string> row{categories[c]};
    for (const Bars& b : series) row.push_back(c < b.values.size() ? cell(b.values[c]) : "-");
    t.rows.push_back(std::move(row));
  }
  return t;
}

DataTable long_table(const Axis& x, const Axis& y, const std::vector<Series>& series, const std::vector<std::string>* x_names = nullptr) {
  DataTable t;
  t.header = {"series", axis_text(x), axis_text(y)};
  for (const Series& s : series) {
    for (std::size_t k = 0; k < s.x.size() && k < s.y.size(); ++k) {
      const auto at = static_cast<std::size_t>(s.x[k]);
      const std::string xs = x_names != nullptr && s.x[k] >= 0 && at < x_names->size() ? (*x_names)[at] : cell(s.x[k]);
      t.rows.push_back({s.name, xs, cell(s.y[k])});
    }
  }
  return t;
}


}  // namespace

std::string gnuplot_text(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (out.size() >= 60) {
      out += "...";
      break;
    }
    const bool plain = std::isalnum(static_cast<unsigned char>(ch)) != 0 || std::string_view(" -_.,:/%()+=#").find(ch) != std::string_view::npos;
    out += plain ? ch : '_';
  }
  return out;
}

Plot line_over_steps(const std::string& title, const Axis& x, const Axis& y_given, const std::vector<Series>& series_given,
                     const std::vector<Level>& levels_given, const std::vector<Mark>& marks) {
  double largest = 0.0, divisor = 1.0;
  for (const Series& s : series_given) largest = largest_of(s.y, largest);
  for (const Level& l : levels_given) largest = largest_of({l.y}, largest);
  const Axis y = human_axis(y_given, largest, divisor);
  std::vector<Series> series = series_given;
  for (Series& s : series) divide(s.y, divisor);
  std::vector<Level> levels = levels_given;
  for (Level& l : levels) l.y /= divisor;
  Plot p;
  p.title = title;
  p.script = header(title, &x, &y);
  for (const Level& l : levels) {
    p.script += fmt::format("set arrow from graph 0, first {0} to graph 1, first {0} nohead dt 2 lw 2 lc rgb \"#222222\"\n", number(l.y));
    p.script += fmt::format("set label {} at graph 0.01, first {} offset 0, 0.7 font \",8\"\n", quoted(l.label), number(l.y));
  }
  p.script += mark_commands(marks);
  p.script += lines_plot(series);
  p.data = long_table(x, y, series);
  for (const Level& l : levels) p.data.rows.push_back({l.label, "all", cell(l.y)});
  for (const Mark& m : marks) p.data.rows.push_back({"mark: " + m.label, cell(m.x), "-"});
  return p;
}

Plot lines_over_runs(const std::string& title, const Axis& y_given, const std::vector<std::string>& runs,
                     const std::vector<Series>& series_given, const std::vector<Mark>& marks) {
  double largest = 0.0, divisor = 1.0;
  for (const Series& s : series_given) largest = largest_of(s.y, largest);
  const Axis y = human_axis(y_given, largest, divisor);
  std::vector<Series> series = series_given;
  for (Series& s : series) divide(s.y, divisor);
  Plot p;
  p.title = title;
  const Axis x{"run", ""};
  p.script = header(title, &x, &y);
  if (!runs.empty()) {
    const std::size_t every = std::max<std::size_t>(1, runs.size() / 15);
    std::string tics;
    for (std::size_t i = 0; i < runs.size(); i += every) tics += fmt::format("{}{} {}", tics.empty() ? "" : ", ", quoted(runs[i]), i);
    // Run ids read upright at a legible size while they fit; many runs turn them.
    p.script += "set xtics (" + tics + ")" + (runs.size() / every > 10 ? " rotate by -45" : "") + " font \",10\"\n";
    p.script += fmt::format("set xrange [-0.5:{}]\n", static_cast<double>(runs.size()) - 0.5);
  }
  p.script += mark_commands(marks);
  bool any = false;
  for (const Series& s : series) {
    for (double v : s.y) any = any || std::isfinite(v);
  }
  p.script += any ? lines_plot(series) : no_data();
  p.data = long_table(x, y, series, &runs);
  for (const Mark& m : marks) {
    const auto at = static_cast<std::size_t>(m.x);
    p.data.rows.push_back({"mark: " + m.label, at < runs.size() ? runs[at] : cell(m.x), "-"});
  }
  return p;
}

namespace {

// Bars per category, stacked or side by side.
Plot bar_chart(const std::string& title, const Axis& y_given, const std::vector<std::string>& categories,
               const std::vector<Bars>& series_given, const std::string& style) {
  double largest = 0.0, divisor = 1.0;
  for (const Bars& b : series_given) largest = largest_of(b.values, largest);
  const Axis y = human_axis(y_given, largest, divisor);
  std::vector<Bars> series = series_given;
  for (Bars& b : series) divide(b.values, divisor);
  Plot p;
  p.title = title;
  p.script = header(title, nullptr, &y);
  if (categories.empty() || series.empty()) {
    p.script += no_data();
  } else {
    // Bars start at zero; a negative one (a headroom that does not fit) is drawn below it.
    bool negative = false;
    for (const Bars& b : series) {
      for (double v : b.values) negative = negative || (std::isfinite(v) && v < 0.0);
    }
    p.script += "set style data histograms\n" + style + (negative ? "set xzeroaxis lt -1 lw 1.5\n" : "set yrange [0:*]\n");
    p.script += bars_plot(categories, series);
  }
  p.data = bars_table("", categories, series);
  if (!y.unit.empty()) {
    for (std::size_t i = 1; i < p.data.header.size(); ++i) p.data.header[i] += " (" + y.unit + ")";
  }
  return p;
}

}  // namespace

Plot stacked_bars(const std::string& title, const Axis& y, const std::vector<std::string>& categories, const std::vector<Bars>& series) {
  return bar_chart(title, y, categories, series, "set style histogram rowstacked\nset boxwidth 0.6 relative\n");
}

Plot histogram(const std::string& title, const Axis& x, const Axis& y, const std::vector<std::string>& bins, const std::vector<double>& counts) {
  Plot p;
  p.title = title;
  p.script = header(title, &x, &y);
  if (bins.empty()) {
    p.script += no_data();
  } else {
    const std::size_t every = std::max<std::size_t>(1, bins.size() / 12);
    p.script += "set style fill pattern 4 border\nset boxwidth 0.85 relative\nset yrange [0:*]\nset key off\n";
    std::string tics;
    for (std::size_t i = 0; i < bins.size(); i += every) tics += fmt::format("{}{} {}", tics.empty() ? "" : ", ", quoted(bins[i]), i);
    p.script += "set xtics (" + tics + ") rotate by -45 font \",8\"\n";
    p.script += fmt::format("set xrange [-0.5:{}]\n", static_cast<double>(bins.size()) - 0.5);
    p.script += fmt::format("plot '-' using 1:2 with boxes lc rgb \"{}\" notitle\n", colour(0));
    for (std::size_t i = 0; i < bins.size(); ++i) p.script += fmt::format("{} {}\n", i, number(i < counts.size() ? counts[i] : 0.0));
    p.script += "e\n";
  }
  p.data.header = {axis_text(x), axis_text(y)};
  for (std::size_t i = 0; i < bins.size(); ++i) p.data.rows.push_back({bins[i], i < counts.size() ? cell(counts[i]) : "-"});
  return p;
}

Plot scatter_front(const std::string& title, const Axis& x_given, const Axis& y_given, const std::vector<ScatterPoint>& points_given) {
  double largest_x = 0.0, largest_y = 0.0, x_divisor = 1.0, y_divisor = 1.0;
  bool x_negative = false, y_negative = false;
  for (const ScatterPoint& pt : points_given) {
    largest_x = largest_of({pt.x}, largest_x);
    largest_y = largest_of({pt.y}, largest_y);
    x_negative = x_negative || pt.x < 0.0;
    y_negative = y_negative || pt.y < 0.0;
  }
  const Axis x = human_axis(x_given, largest_x, x_divisor), y = human_axis(y_given, largest_y, y_divisor);
  std::vector<ScatterPoint> points = points_given;
  for (ScatterPoint& pt : points) {
    pt.x /= x_divisor;
    pt.y /= y_divisor;
  }
  Plot p;
  p.title = title;
  p.script = header(title, &x, &y);
  std::vector<ScatterPoint> front, rest;
  for (const ScatterPoint& pt : points) (pt.front ? front : rest).push_back(pt);
  std::sort(front.begin(), front.end(), [](const ScatterPoint& a, const ScatterPoint& b) { return a.x < b.x; });
  if (points.empty()) {
    p.script += no_data();
  } else {
    // Room for the labels, but never below zero for figures that cannot be negative.
    p.script += fmt::format("set offsets graph {}, graph 0.25, graph 0.12, graph {}\n", x_negative ? "0.08" : "0", y_negative ? "0.12" : "0");
    if (!x_negative) p.script += "set xrange [0:*]\n";
    if (!y_negative) p.script += "set yrange [0:*]\n";
    std::string cmd = "plot ", data;
    const auto block = [&](const std::vector<ScatterPoint>& pts, bool labels) {
      for (const ScatterPoint& pt : pts) data += number(pt.x) + " " + number(pt.y) + (labels ? " " + quoted(pt.label) : "") + "\n";
      data += "e\n";
    };
    if (!front.empty()) {
      cmd += fmt::format("'-' using 1:2 with linespoints pt 7 ps 1.2 lw 1.8 dt 1 lc rgb \"{}\" title \"front\"", colour(0));
      block(front, false);
    }
    if (!rest.empty()) {
      cmd += std::string(front.empty() ? "" : ", ") + "'-' using 1:2 with points pt 6 ps 1.1 lc rgb \"#aaaaaa\" title \"dominated\"";
      block(rest, false);
    }
    cmd += ", '-' using 1:2:3 with labels offset 1, 0.8 left font \",8\" tc rgb \"#333333\" notitle";
    std::vector<ScatterPoint> all = front;
    all.insert(all.end(), rest.begin(), rest.end());
    block(all, true);
    p.script += cmd + "\n" + data;
  }
  p.data.header = {"point", axis_text(x), axis_text(y), "on the front"};
  for (const ScatterPoint& pt : points) p.data.rows.push_back({pt.label, cell(pt.x), cell(pt.y), pt.front ? "yes" : "no"});
  return p;
}

Plot grouped_bars(const std::string& title, const Axis& y, const std::vector<std::string>& categories, const std::vector<Bars>& series) {
  return bar_chart(title, y, categories, series, "set style histogram clustered gap 1\nset xtics rotate by -30 font \",8\"\n");
}

std::string find_gnuplot() {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::stringstream dirs(path);
  for (std::string dir; std::getline(dirs, dir, ':');) {
    if (dir.empty()) continue;
    const fs::path candidate = fs::path(dir) / "gnuplot";
    if (::access(candidate.c_str(), X_OK) == 0 && fs::is_regular_file(candidate)) return candidate.string();
  }
  return "";
}

namespace {

// SIGPIPE blocked in this thread while it lives: a gnuplot that exits early (a bad script, a
// path the shell cannot run) makes our writes fail with EPIPE instead of killing the process.
// A SIGPIPE the writes raised is consumed before the mask is restored.
class PipeSignalGuard {
 public:
  PipeSignalGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~PipeSignalGuard() {
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) == 1) {
      const timespec now{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &now) == SIGPIPE) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  PipeSignalGuard(const PipeSignalGuard&) = delete;
  PipeSignalGuard& operator=(const PipeSignalGuard&) = delete;

 private:
  sigset_t pipe_{}, old_{};
};

// Single-quoted for /bin/sh.
std::string shell_quoted(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

}  // namespace

RenderOutcome render(const std::vector<Plot*>& plots, std::string gnuplot) {
  RenderOutcome outcome;
  if (gnuplot.empty()) gnuplot = find_gnuplot();
  if (gnuplot.empty()) {
    outcome.note = "plots unavailable: gnuplot not found";
    for (Plot* p : plots) p->error = outcome.note;
    return outcome;
  }
  if (::access(gnuplot.c_str(), X_OK) != 0 || !fs::is_regular_file(gnuplot)) {
    outcome.note = "plots unavailable: gnuplot '" + gnuplot + "' is not an executable file";
    for (Plot* p : plots) p->error = outcome.note;
    return outcome;
  }
  // A private directory of generated names: nothing from the database becomes a path.
  std::string pattern = (fs::temp_directory_path() / "kvbench-plots-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr || pattern.find_first_of("'\"\\\n") != std::string::npos) {
    outcome.note = "plots unavailable: cannot create a temporary directory";
    for (Plot* p : plots) p->error = outcome.note;
    return outcome;
  }
  const fs::path dir(pattern);
  const fs::path errors = dir / "gnuplot.err";
  {
    const PipeSignalGuard guard;
    Gnuplot gp(shell_quoted(gnuplot) + " 2>" + shell_quoted(errors.string()));
    for (std::size_t i = 0; i < plots.size(); ++i) {
      gp << "reset\nset terminal svg size 760,340 font \"sans,10\" noenhanced background rgb \"white\"\n";
      gp << "set output '" << (dir / fmt::format("plot-{}.svg", i)).string() << "'\n";
      gp << plots[i]->script;
      gp << "unset output\n";
    }
    gp.flush();
  }  // waits for gnuplot to finish
  outcome.available = true;
  std::ifstream err(errors);
  std::stringstream err_text;
  err_text << err.rdbuf();
  for (std::size_t i = 0; i < plots.size(); ++i) {
    std::ifstream in(dir / fmt::format("plot-{}.svg", i), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    plots[i]->svg = text.str();
    if (plots[i]->svg.find("</svg>") == std::string::npos) {
      plots[i]->svg.clear();
      plots[i]->error = "gnuplot did not draw this plot";
    }
  }
  std::error_code ec;
  fs::remove_all(dir, ec);
  const std::string messages = err_text.str();
  // gnuplot echoes a command it refused ("gnuplot> ...") above its message, which need not say "error".
  if (messages.find("rror") != std::string::npos || messages.find("gnuplot>") != std::string::npos) {
    outcome.note = "gnuplot reported: " + messages.substr(0, 300);
  }
  return outcome;
}

}  // namespace kvbench::report
