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
#include "plot_layout.h"

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

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines(1);
  for (char ch : text) {
    if (ch == '\n') {
      lines.emplace_back();
    } else {
      lines.back() += ch;
    }
  }
  return lines;
}

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
  std::string s = "set title \"" + gnuplot_text(title, 110) + "\"\n";
  if (x != nullptr) s += "set xlabel " + quoted(axis_text(*x)) + "\n";
  if (y != nullptr) s += "set ylabel " + quoted(axis_text(*y)) + "\n";
  s += "set grid lc rgb \"#dddddd\"\nset border lc rgb \"#555555\"\n";
  return s;
}

// The key at the foot of the plot and the margin above it for the tic labels (in lines) and the
// x label: gnuplot's own key below the plot sits on the x label.
std::string bottom(const std::vector<std::string>& names, int tic_lines, bool xlabel) {
  int rows = 0;
  double used = kFrameWidth + 1.0;
  for (const std::string& n : names) {
    const double w = text_width(gnuplot_text(n), 10.0) + 60.0;
    if (used + w > kFrameWidth) {
      ++rows;
      used = 0.0;
    }
    used += w;
  }
  const double margin = 1.2 + 1.1 * tic_lines + (xlabel ? 1.5 : 0.0) + (rows > 0 ? 1.3 * rows + 0.6 : 0.0);
  std::string s = fmt::format("set bmargin {:.1f}\n", margin);
  s += rows > 0 ? "set key at screen 0.5, screen 0.015 center bottom horizontal box lc rgb \"#bbbbbb\"\n" : "set key off\n";
  return s;
}

std::vector<std::string> names_of(const std::vector<Series>& series) {
  std::vector<std::string> names;
  for (const Series& s : series) names.push_back(s.name);
  return names;
}

// An empty frame saying so: gnuplot refuses to plot nothing.
std::string no_data() {
  return "set xrange [0:1]\nset yrange [0:1]\nunset xtics\nunset ytics\nset label \"no data\" at graph 0.5, graph 0.5 center\n"
         "plot 2 notitle\n";
}

// A dashed line per mark; its label above the frame, clear of the data it marks, in the first
// of two rows where it covers no other label (else the line alone: the table keeps it).
std::string mark_commands(const std::vector<Mark>& marks, double lo, double hi) {
  constexpr double kFont = 8.0;
  std::vector<double> xs;
  std::vector<std::string> labels;
  for (const Mark& m : marks) {
    xs.push_back(m.labelled ? m.x : NAN);
    labels.push_back(gnuplot_text(m.label));
  }
  const std::vector<MarkLabel> placed = stagger_labels(xs, labels, lo, hi, 2, kFont);
  std::string s;
  int rows = 0;
  for (std::size_t i = 0; i < marks.size(); ++i) {
    const Mark& m = marks[i];
    s += fmt::format("set arrow from first {0}, graph 0 to first {0}, graph 1 nohead dt 4 lw 1 lc rgb \"#777777\"\n", number(m.x));
    if (!m.labelled || placed[i].row < 0) continue;
    s += fmt::format("set label {} at first {}, graph 1 offset 0, {} {} font \",8\" tc rgb \"#555555\"\n", quoted(m.label), number(m.x),
                     0.7 + 1.1 * placed[i].row, placed[i].align);
    rows = std::max(rows, placed[i].row + 1);
  }
  // The title above the label rows.
  if (rows > 0) s += fmt::format("set tmargin {}\nset title offset 0, {}\n", 3 + rows, 1.1 * rows);
  return s;
}

// The x extent of what a plot draws, for placing its labels.
std::pair<double, double> x_extent(const std::vector<Series>& series, const std::vector<Mark>& marks) {
  double lo = INFINITY, hi = -INFINITY;
  for (const Series& s : series) {
    for (double x : s.x) {
      if (std::isfinite(x)) lo = std::min(lo, x), hi = std::max(hi, x);
    }
  }
  for (const Mark& m : marks) lo = std::min(lo, m.x), hi = std::max(hi, m.x);
  return std::isfinite(lo) ? std::make_pair(lo, hi) : std::make_pair(0.0, 1.0);
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
    cmd += fmt::format("{}'-' using 1 title {} fs pattern {} border lc rgb \"{}\" lc rgb \"{}\"", i == 0 ? "" : ", ", quoted(series[i].name),
                       pattern(i), colour(i), colour(i));
    for (std::size_t c = 0; c < categories.size(); ++c) {
      const double v = c < series[i].values.size() && std::isfinite(series[i].values[c]) ? series[i].values[c] : 0.0;
      data += number(v) + "\n";
    }
    data += "e\n";
  }
  return cmd + "\n" + data;
}

// Category names under the bars, upright, in lines (or numbered, with the key in the caption).
std::string category_tics(const std::vector<std::string>& categories, std::string& note, int& lines_used) {
  // Names as gnuplot may see them (a newline in one is not a line break) before they are laid out.
  std::vector<std::string> names;
  for (const std::string& c : categories) names.push_back(gnuplot_text(c, 200));
  const CategoryTicks ticks = category_ticks(names, 9.0);
  lines_used = ticks.lines;
  std::string tics;
  for (std::size_t i = 0; i < ticks.text.size(); ++i) {
    std::string lines;
    for (const std::string& line : split_lines(ticks.text[i])) lines += (lines.empty() ? "" : "\\n") + line;
    // A tic label is a format: "25%" would read as a conversion.
    for (std::size_t at = lines.find('%'); at != std::string::npos; at = lines.find('%', at + 2)) lines.insert(at, "%");
    tics += fmt::format("{}\"{}\" {}", tics.empty() ? "" : ", ", lines, i);
  }
  if (!ticks.shared.empty()) note = "every name starts " + ticks.shared;
  if (ticks.numbered) note += (note.empty() ? "" : "; ") + ticks.legend;
  return "set xtics (" + tics + ") font \",9\" scale 0\n";
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

std::string gnuplot_text(const std::string& text, std::size_t longest) {
  std::string out;
  for (char ch : text) {
    if (out.size() >= longest) {
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
  const auto [lo, hi] = x_extent(series, marks);
  p.script += mark_commands(marks, lo, hi);
  p.script += bottom(names_of(series), 1, true);
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
  p.script += mark_commands(marks, -0.5, static_cast<double>(runs.size()) - 0.5);
  p.script += bottom(names_of(series), runs.size() > 10 ? 3 : 1, true);
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
    int tic_lines = 1;
    p.script += category_tics(categories, p.note, tic_lines);
    std::vector<std::string> names;
    for (const Bars& b : series) names.push_back(b.name);
    p.script += bottom(names, tic_lines, false);
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
    // Bin labels upright, as many as fit side by side with room between them.
    double widest = 0.0;
    for (const std::string& b : bins) widest = std::max(widest, text_width(gnuplot_text(b), 9.0) + 12.0);
    const auto fit = static_cast<std::size_t>(std::max(1.0, kFrameWidth / widest));
    const std::size_t every = (bins.size() + fit - 1) / fit;
    p.script += "set style fill pattern 4 border\nset boxwidth 0.85 relative\nset yrange [0:*]\nset key off\n";
    std::string tics;
    for (std::size_t i = 0; i < bins.size(); i += every) tics += fmt::format("{}{} {}", tics.empty() ? "" : ", ", quoted(bins[i]), i);
    p.script += "set xtics (" + tics + ") font \",9\"\n" + bottom({}, 1, true);
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
    // The ranges set here (room around the points, never below zero for figures that cannot be
    // negative) are the ones the labels are placed in.
    const auto range = [](const std::vector<ScatterPoint>& pts, double ScatterPoint::*axis, bool negative) {
      double lo = INFINITY, hi = -INFINITY;
      for (const ScatterPoint& pt : pts) lo = std::min(lo, pt.*axis), hi = std::max(hi, pt.*axis);
      if (!negative) lo = 0.0;
      const double span = hi > lo ? hi - lo : std::max(std::fabs(hi), 1.0);
      return std::make_pair(negative ? lo - 0.08 * span : lo, hi + 0.12 * span);
    };
    const auto [x_lo, x_hi] = range(points, &ScatterPoint::x, x_negative);
    const auto [y_lo, y_hi] = range(points, &ScatterPoint::y, y_negative);
    p.script += fmt::format("set xrange [{}:{}]\nset yrange [{}:{}]\n", number(x_lo), number(x_hi), number(y_lo), number(y_hi));
    std::string cmd = "plot ", data;
    const auto block = [&](const std::vector<ScatterPoint>& pts) {
      for (const ScatterPoint& pt : pts) data += number(pt.x) + " " + number(pt.y) + "\n";
      data += "e\n";
    };
    if (!front.empty()) {
      cmd += fmt::format("'-' using 1:2 with linespoints pt 7 ps 1.2 lw 1.8 dt 1 lc rgb \"{}\" title \"front\"", colour(0));
      block(front);
    }
    if (!rest.empty()) {
      cmd += std::string(front.empty() ? "" : ", ") + "'-' using 1:2 with points pt 6 ps 1.1 lc rgb \"#aaaaaa\" title \"dominated\"";
      block(rest);
    }
    // Each point numbered beside it, the numbers' key in the caption: names would cover each other.
    std::vector<double> xs, ys;
    for (const ScatterPoint& pt : points) xs.push_back(pt.x), ys.push_back(pt.y);
    const std::vector<PointLabel> labels = place_point_labels(xs, ys, x_lo, x_hi, y_lo, y_hi, 9.0);
    for (std::size_t i = 0; i < points.size(); ++i) {
      if (labels[i].shown) {
        p.script += fmt::format("set label {} at first {}, first {} offset character {}, character {} left font \",9\" tc rgb \"#333333\"\n",
                                quoted(labels[i].text), number(points[i].x), number(points[i].y), number(labels[i].dx / 6.0),
                                number(-labels[i].dy / 12.0));
      }
      p.note += (i == 0 ? "points: " : ", ") + std::to_string(i + 1) + " " + points[i].label;
    }
    p.script += bottom(front.empty() || rest.empty() ? std::vector<std::string>{"front"} : std::vector<std::string>{"front", "dominated"}, 1, true);
    p.script += cmd + "\n" + data;
  }
  p.data.header = {"#", "point", axis_text(x), axis_text(y), "on the front"};
  for (std::size_t i = 0; i < points.size(); ++i) {
    const ScatterPoint& pt = points[i];
    p.data.rows.push_back({std::to_string(i + 1), pt.label, cell(pt.x), cell(pt.y), pt.front ? "yes" : "no"});
  }
  return p;
}

Plot grouped_bars(const std::string& title, const Axis& y, const std::vector<std::string>& categories, const std::vector<Bars>& series) {
  return bar_chart(title, y, categories, series, "set style histogram clustered gap 1\n");
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
