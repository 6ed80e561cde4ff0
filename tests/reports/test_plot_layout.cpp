// Label placement for plots: no two placed labels cover each other, whatever the input; names
// break where they have parts; coincident points share a label.
#include <catch2/catch.hpp>

#include <random>

#include "plot_layout.h"

using namespace kvbench::report;

TEST_CASE("plot layout: mark labels on one row never cover each other, on random marks", "[reports][plot-layout]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> at(0.0, 100.0);
  std::uniform_int_distribution<int> length(3, 30);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> xs;
    std::vector<std::string> labels;
    const int n = 1 + trial % 12;
    for (int i = 0; i < n; ++i) {
      xs.push_back(at(rng));
      labels.push_back(std::string(static_cast<std::size_t>(length(rng)), 'w'));
    }
    const auto placed = stagger_labels(xs, labels, 0.0, 100.0, 2, 8.0);
    REQUIRE(placed.size() == xs.size());
    // Two labels on one row: their centres (or ends) apart by at least half of both widths.
    for (int i = 0; i < n; ++i) {
      for (int k = i + 1; k < n; ++k) {
        if (placed[i].row < 0 || placed[i].row != placed[k].row) continue;
        const auto span = [&](int j) {
          const double c = xs[j] / 100.0 * kFrameWidth, w = text_width(labels[j], 8.0) + 8.0;
          const std::string align = placed[j].align;
          return align == "right" ? std::make_pair(c - w, c) : align == "left" ? std::make_pair(c, c + w) : std::make_pair(c - w / 2, c + w / 2);
        };
        const auto a = span(i), b = span(k);
        INFO("trial " << trial << " marks " << i << " and " << k);
        CHECK((a.second <= b.first || b.second <= a.first));
      }
    }
  }
  // The first label always gets the nearest row; one at the right edge ends at its line.
  const auto edge = stagger_labels({99.0}, {"warning to danger"}, 0.0, 100.0, 2, 8.0);
  CHECK(edge[0].row == 0);
  CHECK(std::string(edge[0].align) == "right");
}

TEST_CASE("plot layout: category names lose their shared parts and break at slashes, then hyphens", "[reports][plot-layout]") {
  const CategoryTicks t = category_ticks({"syn-7b/rag-2k/f16-full", "syn-7b/rag-2k/q4-hybrid-tight"}, 9.0);
  CHECK(t.shared == "syn-7b/rag-2k/");
  CHECK_FALSE(t.numbered);
  CHECK(t.text == std::vector<std::string>{"f16-full", "q4-hybrid-tight"});
  const CategoryTicks eight = category_ticks({"m/rag-2k/f16-full", "m/rag-2k/q4-hybrid-tight", "m/codebase-4k/f16-full", "m/codebase-4k/q4-hybrid-tight",
                                              "m/roleplay-4t/f16-full", "m/roleplay-4t/q4-hybrid-tight", "m/multimodal-1i/f16-full",
                                              "m/multimodal-1i/q4-hybrid-tight"},
                                             9.0);
  CHECK(eight.shared == "m/");
  CHECK(eight.text[1] == "rag-2k\nq4-hybrid-\ntight");
  CHECK(eight.lines == 3);
  // One name alone keeps its parts; an unbreakable name too wide for its slot numbers them all.
  CHECK(category_ticks({"a/b"}, 9.0).text == std::vector<std::string>{"a/b"});
  std::vector<std::string> wide(20, std::string(40, 'x'));
  const CategoryTicks numbered = category_ticks(wide, 9.0);
  CHECK(numbered.numbered);
  CHECK(numbered.text[19] == "20");
  CHECK(numbered.legend.rfind("20 " + std::string(40, 'x')) != std::string::npos);
}

TEST_CASE("plot layout: point labels never cover each other or a point, on random points", "[reports][plot-layout]") {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<double> xs, ys;
    const int n = 2 + trial % 15;
    for (int i = 0; i < n; ++i) xs.push_back(u(rng)), ys.push_back(u(rng));
    const auto labels = place_point_labels(xs, ys, 0.0, 1.0, 0.0, 1.0, 9.0);
    REQUIRE(labels.size() == static_cast<std::size_t>(n));
    struct B {
      double l, t, r, b;
    };
    std::vector<B> boxes;
    for (int i = 0; i < n; ++i) {
      if (!labels[i].shown) continue;
      const double px = xs[i] * kFrameWidth, w = text_width(labels[i].text, 9.0) + 2.0, h = 11.0;
      const double py = (1.0 - ys[i]) * 220.0;
      boxes.push_back({px + labels[i].dx, py + labels[i].dy - h / 2, px + labels[i].dx + w, py + labels[i].dy + h / 2});
    }
    for (std::size_t i = 0; i < boxes.size(); ++i) {
      for (std::size_t k = i + 1; k < boxes.size(); ++k) {
        const B &a = boxes[i], &b = boxes[k];
        INFO("trial " << trial);
        CHECK((a.r <= b.l || b.r <= a.l || a.b <= b.t || b.b <= a.t));
      }
      // Clear of every point's marker.
      for (int p = 0; p < n; ++p) {
        const double px = xs[p] * kFrameWidth, py = (1.0 - ys[p]) * 220.0;
        CHECK((boxes[i].r <= px - 6 || px + 6 <= boxes[i].l || boxes[i].b <= py - 6 || py + 6 <= boxes[i].t));
      }
    }
  }
  // Points on one another share the first one's label.
  const auto shared = place_point_labels({0.5, 0.5, 0.2}, {0.5, 0.5, 0.2}, 0.0, 1.0, 0.0, 1.0, 9.0);
  CHECK(shared[0].text == "1,2");
  CHECK_FALSE(shared[1].shown);
  CHECK(shared[2].text == "3");
}
