// Plots for reports: one function per plot kind, each taking plain data and labels (never the
// database) and giving a Plot - a gnuplot script with its data inline, and the same data as a
// table. render() draws a batch of plots through one gnuplot process (gnuplot-iostream, the
// svg terminal) and fills in their SVG text; without gnuplot the tables stand alone.
//
// Every axis names its unit. Series differ by dash pattern, marker or fill pattern as well as
// colour, so a page printed in greyscale still reads. Labels reach gnuplot only through a
// sanitiser (letters, digits and plain punctuation): a name from a suite can neither break the
// script nor inject a command.
#pragma once

#include <string>
#include <vector>

namespace kvbench::report {

struct Axis {
  std::string label;
  std::string unit;  // shown as "label (unit)"
};

struct Series {
  std::string name;
  std::vector<double> x, y;  // equal sizes; NaN y values are gaps
};

// A vertical mark at x (a change point, the baseline run, a pressure transition).
struct Mark {
  double x = 0.0;
  std::string label;
  bool labelled = true;  // false: the line only (its label would overlap a neighbour's); the table keeps it
};

// A horizontal level (a cap).
struct Level {
  double y = 0.0;
  std::string label;
};

struct DataTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

struct Plot {
  std::string title;
  std::string script;  // gnuplot commands after the terminal and output are set
  DataTable data;
  std::string note;    // what the caption adds to read the drawing (a key to numbered points or categories)
  std::string svg;     // filled by render(): the SVG as gnuplot wrote it ("" when not drawn)
  std::string error;   // why it was not drawn
};

// Values over steps, one line per series; levels and marks drawn across the plot.
Plot line_over_steps(const std::string& title, const Axis& x, const Axis& y, const std::vector<Series>& series,
                     const std::vector<Level>& levels = {}, const std::vector<Mark>& marks = {});

// Values over runs: x positions are the runs in order (labels: their ids); each series has one
// value per run (NaN: none); marks sit at run positions.
Plot lines_over_runs(const std::string& title, const Axis& y, const std::vector<std::string>& runs,
                     const std::vector<Series>& series, const std::vector<Mark>& marks = {});

struct Bars {
  std::string name;
  std::vector<double> values;  // one per category
};

// One bar per category, stacked from the series.
Plot stacked_bars(const std::string& title, const Axis& y, const std::vector<std::string>& categories, const std::vector<Bars>& series);

// Counts per bin.
Plot histogram(const std::string& title, const Axis& x, const Axis& y, const std::vector<std::string>& bins,
               const std::vector<double>& counts);

struct ScatterPoint {
  double x = 0.0, y = 0.0;
  std::string label;
  bool front = false;  // on the Pareto front: drawn solid and joined; others faded
};

// Points, the front joined in x order, the dominated ones faded.
Plot scatter_front(const std::string& title, const Axis& x, const Axis& y, const std::vector<ScatterPoint>& points);

// One cluster per category, one bar per series.
Plot grouped_bars(const std::string& title, const Axis& y, const std::vector<std::string>& categories, const std::vector<Bars>& series);

// gnuplot's path on PATH, "" when it is not there.
std::string find_gnuplot();

struct RenderOutcome {
  bool available = false;  // gnuplot ran
  std::string note;        // "plots unavailable: gnuplot not found", or what went wrong
};

// Draws every plot through one gnuplot process. `gnuplot`: its path ("" to look on PATH).
RenderOutcome render(const std::vector<Plot*>& plots, std::string gnuplot = "");

// A label as gnuplot may see it: letters, digits and plain punctuation only, at most `longest`
// characters (a title has room for more).
std::string gnuplot_text(const std::string& text, std::size_t longest = 60);

}  // namespace kvbench::report
