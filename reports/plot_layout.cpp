#include "plot_layout.h"

#include <algorithm>
#include <cmath>

namespace kvbench::report {

namespace {

struct Box {
  double left, top, right, bottom;
  bool covers(const Box& o) const { return std::min(right, o.right) - std::max(left, o.left) > 0.0 && std::min(bottom, o.bottom) - std::max(top, o.top) > 0.0; }
};

// The frame's height inside a kPlotHeight plot with a title above and the axis, its label and
// the key below.
constexpr double kFrameHeight = 220.0;

std::vector<std::string> split(const std::string& text, char at) {
  std::vector<std::string> parts;
  std::string part;
  for (char ch : text) {
    if (ch == at) {
      parts.push_back(part);
      part.clear();
    } else {
      part += ch;
    }
  }
  parts.push_back(part);
  return parts;
}

}  // namespace

double text_width(const std::string& text, double font_px) {
  std::size_t chars = 0;
  for (unsigned char ch : text) chars += (ch & 0xC0) != 0x80 ? 1 : 0;  // UTF-8 continuation bytes are not characters
  return 0.62 * font_px * static_cast<double>(chars);
}

std::vector<MarkLabel> stagger_labels(const std::vector<double>& xs, const std::vector<std::string>& labels, double lo, double hi, int rows,
                                      double font_px) {
  std::vector<MarkLabel> out(xs.size());
  std::vector<std::vector<Box>> placed(static_cast<std::size_t>(std::max(rows, 0)));
  const double span = hi > lo ? hi - lo : 1.0;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double at = (xs[i] - lo) / span * kFrameWidth;
    const double w = text_width(i < labels.size() ? labels[i] : "", font_px) + 8.0;
    // The plot has about 20 px right of the frame and 80 px left of it.
    double left = at - w / 2.0;
    const char* align = "center";
    if (at + w / 2.0 > kFrameWidth + 15.0) {
      left = at - w;
      align = "right";
    } else if (left < -70.0) {
      left = at;
      align = "left";
    }
    const Box box{left, 0.0, left + w, 1.0};
    for (std::size_t r = 0; r < placed.size(); ++r) {
      if (std::none_of(placed[r].begin(), placed[r].end(), [&](const Box& b) { return b.covers(box); })) {
        placed[r].push_back(box);
        out[i] = {static_cast<int>(r), align};
        break;
      }
    }
  }
  return out;
}

CategoryTicks category_ticks(const std::vector<std::string>& categories, double font_px) {
  CategoryTicks t;
  const std::size_t n = categories.size();
  if (n == 0) return t;
  // The leading parts every name shares, when each keeps a part of its own.
  std::vector<std::vector<std::string>> parts;
  for (const std::string& c : categories) parts.push_back(split(c, '/'));
  std::size_t common = 0;
  if (n > 1) {
    for (;; ++common) {
      bool same = true;
      for (const auto& p : parts) same = same && common + 1 < p.size() && p[common] == parts.front()[common];
      if (!same) break;
    }
  }
  for (std::size_t k = 0; k < common; ++k) t.shared += parts.front()[k] + "/";
  const double slot = kFrameWidth / static_cast<double>(n) - 6.0;
  for (std::size_t i = 0; i < n; ++i) {
    // Tokens: the name's own parts, a parenthesised remark ("(hybrid 25%)") a token of its own.
    std::vector<std::pair<std::string, std::string>> tokens;  // text, the separator before it
    for (std::size_t k = common; k < parts[i].size(); ++k) {
      const std::string& part = parts[i][k];
      const std::size_t paren = part.find(" (");
      // A part too wide for its slot breaks after a hyphen ("q4-hybrid-" over "tight").
      std::string sep = k == common ? "" : "/";
      std::string rest = part.substr(0, paren);
      while (text_width(rest, font_px) > slot) {
        std::size_t cut = std::string::npos;
        for (std::size_t at = rest.find('-'); at != std::string::npos && text_width(rest.substr(0, at + 1), font_px) <= slot; at = rest.find('-', at + 1)) cut = at;
        if (cut == std::string::npos) break;
        tokens.emplace_back(rest.substr(0, cut + 1), sep);
        rest = rest.substr(cut + 1);
        sep = "";
      }
      tokens.emplace_back(rest, sep);
      if (paren != std::string::npos) tokens.emplace_back(part.substr(paren + 1), " ");
    }
    std::vector<std::string> lines;
    for (const auto& [text, sep] : tokens) {
      if (text_width(text, font_px) > slot) t.numbered = true;
      if (!lines.empty() && text_width(lines.back() + sep + text, font_px) <= slot) {
        lines.back() += sep + text;
      } else {
        lines.push_back(text);
      }
    }
    t.lines = std::max(t.lines, static_cast<int>(lines.size()));
    std::string joined;
    for (const std::string& l : lines) joined += (joined.empty() ? "" : "\n") + l;
    t.text.push_back(joined);
  }
  if (t.numbered || t.lines > 4) {
    t.numbered = true;
    t.lines = 1;
    t.legend.clear();
    for (std::size_t i = 0; i < n; ++i) {
      t.text[i] = std::to_string(i + 1);
      t.legend += (i == 0 ? "" : ", ") + std::to_string(i + 1) + " " + categories[i].substr(t.shared.size());
    }
  }
  return t;
}

std::vector<PointLabel> place_point_labels(const std::vector<double>& xs, const std::vector<double>& ys, double x_lo, double x_hi,
                                           double y_lo, double y_hi, double font_px) {
  const std::size_t n = std::min(xs.size(), ys.size());
  std::vector<PointLabel> out(n);
  std::vector<double> px(n), py(n);
  const double xs_span = x_hi > x_lo ? x_hi - x_lo : 1.0, ys_span = y_hi > y_lo ? y_hi - y_lo : 1.0;
  for (std::size_t i = 0; i < n; ++i) {
    px[i] = (xs[i] - x_lo) / xs_span * kFrameWidth;
    py[i] = (y_hi - ys[i]) / ys_span * kFrameHeight;
  }
  // Points that fall on one another (within a marker) share the first one's label.
  constexpr double kMarker = 6.0;
  std::vector<std::size_t> owner(n);
  for (std::size_t i = 0; i < n; ++i) {
    owner[i] = i;
    for (std::size_t k = 0; k < i; ++k) {
      if (owner[k] == k && std::fabs(px[k] - px[i]) < kMarker && std::fabs(py[k] - py[i]) < kMarker) {
        owner[i] = k;
        break;
      }
    }
    out[i].text = std::to_string(i + 1);
    out[i].shown = owner[i] == i;
    if (owner[i] != i) out[owner[i]].text += "," + std::to_string(i + 1);
  }
  std::vector<Box> taken;
  for (std::size_t i = 0; i < n; ++i) taken.push_back({px[i] - kMarker, py[i] - kMarker, px[i] + kMarker, py[i] + kMarker});
  const double h = font_px + 2.0;
  for (std::size_t i = 0; i < n; ++i) {
    if (!out[i].shown) continue;
    const double w = text_width(out[i].text, font_px) + 2.0;
    // Right, left, above, below: the box's top-left corner relative to the point.
    const double tries[4][2] = {{kMarker + 1.0, -h / 2.0}, {-kMarker - 1.0 - w, -h / 2.0}, {-w / 2.0, -kMarker - 1.0 - h}, {-w / 2.0, kMarker + 1.0}};
    bool placed = false;
    for (const auto& t : tries) {
      const Box box{px[i] + t[0], py[i] + t[1], px[i] + t[0] + w, py[i] + t[1] + h};
      // Inside the frame, clear of every point (its own too) and every label placed.
      if (box.left < 0.0 || box.right > kFrameWidth || box.top < 0.0 || box.bottom > kFrameHeight) continue;
      if (std::any_of(taken.begin(), taken.end(), [&](const Box& b) { return b.covers(box); })) continue;
      taken.push_back(box);
      out[i].dx = t[0];
      out[i].dy = t[1] + h / 2.0;  // the box's middle, where gnuplot's label sits vertically
      placed = true;
      break;
    }
    out[i].shown = placed;
  }
  return out;
}

}  // namespace kvbench::report
