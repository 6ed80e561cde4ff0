// Where a plot's text goes so that no label covers another: mark labels staggered above the
// frame, category names set in lines under their bars, point numbers beside their points. The
// plots are drawn at a fixed size (kPlotWidth x kPlotHeight, scaled as a whole by the page), so
// text widths are estimated here from the character count; the browser test measures the result.
#pragma once

#include <string>
#include <vector>

namespace kvbench::report {

inline constexpr int kPlotWidth = 760, kPlotHeight = 340;
// The frame's share of the plot's width, left of it the y axis and its label.
inline constexpr double kFrameWidth = 650.0;

// The width a label takes at a font size, in pixels (sans: about 0.62 of the size per character).
double text_width(const std::string& text, double font_px);

// Mark labels above the frame: for each mark (x in [lo, hi]) the row its label goes in (0, the
// nearest the frame, up to rows - 1; -1 where every row would cover another label) and its
// alignment: centred on its line, or ending (starting) at it near the frame's right (left) edge.
struct MarkLabel {
  int row = -1;
  const char* align = "center";  // gnuplot's: center, right, left
};
std::vector<MarkLabel> stagger_labels(const std::vector<double>& xs, const std::vector<std::string>& labels, double lo, double hi, int rows,
                                      double font_px);

// Category names under bars: the parts every name shares said once (`shared`, "" none), each
// name's own parts set in lines at its '/' and spaces; where a line is wider than its slot the
// categories are numbered instead and `legend` says which number is which.
struct CategoryTicks {
  std::vector<std::string> text;  // per category, lines joined with '\n'
  std::string shared;             // "syn-7b/": left out of every tick
  bool numbered = false;
  std::string legend;             // "1 rag-2k/f16-full, 2 ..." when numbered
  int lines = 1;                  // the most lines a tick has
};
CategoryTicks category_ticks(const std::vector<std::string>& categories, double font_px);

// Numbers beside points: for each point (already in plot units within [x_lo, x_hi] x [y_lo,
// y_hi]) its number ("1" for the first) and where it goes, in pixels from the point (right,
// left, above or below it, the first that covers no other label or point); points that fall on
// one another share one label ("2,5"); `shown` is false for the others, and for a point with no
// free place (its number is still in the plot's list).
struct PointLabel {
  std::string text;
  double dx = 0.0, dy = 0.0;
  bool shown = true;
};
std::vector<PointLabel> place_point_labels(const std::vector<double>& xs, const std::vector<double>& ys, double x_lo, double x_hi,
                                           double y_lo, double y_hi, double font_px);

}  // namespace kvbench::report
