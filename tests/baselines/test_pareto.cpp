// Pareto fronts on hand-made points: exactly the non-dominated set, each objective's direction
// respected, ties kept on the front, and what dominates each dominated point.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "pareto.h"

using namespace kvbench;

namespace {

std::vector<std::string> front_of(const std::vector<ParetoPoint>& points, const std::vector<Better>& directions) {
  const ParetoResult r = pareto_front(points, directions);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < points.size(); ++i) {
    if (r.on_front[i]) out.push_back(points[i].label);
  }
  return out;
}

}  // namespace

TEST_CASE("pareto: the front is exactly the non-dominated points", "[pareto]") {
  // x: KV bytes per token (lower), y: attention error (lower).
  const std::vector<ParetoPoint> points = {
      {"f16", {128.0, 0.00}}, {"q8", {64.0, 0.01}}, {"q4", {34.0, 0.05}},
      {"q4-worse", {40.0, 0.06}},  // beaten by q4 on both
      {"q2", {18.0, 0.30}},        {"q8-bloated", {70.0, 0.02}},  // beaten by q8
  };
  const std::vector<Better> lower = {Better::Lower, Better::Lower};
  CHECK(front_of(points, lower) == std::vector<std::string>{"f16", "q8", "q4", "q2"});
  const ParetoResult r = pareto_front(points, lower);
  CHECK(r.dominated_by[3] == std::vector<std::size_t>{2});
  CHECK(r.dominated_by[5] == std::vector<std::size_t>{1});
  CHECK(r.dominated_by[0].empty());
}

TEST_CASE("pareto: directions are respected", "[pareto]") {
  // y is attention-mass recall: higher is better.
  const std::vector<ParetoPoint> points = {{"a", {100.0, 0.99}}, {"b", {50.0, 0.90}}, {"c", {50.0, 0.80}}, {"d", {120.0, 0.95}}};
  CHECK(front_of(points, {Better::Lower, Better::Higher}) == std::vector<std::string>{"a", "b"});
  // Read as lower-is-better the same points give the opposite corner.
  CHECK(front_of(points, {Better::Lower, Better::Lower}) == std::vector<std::string>{"c"});
  // A third objective (decode tok/s, higher) can bring a dominated point back.
  const std::vector<ParetoPoint> three = {{"a", {100.0, 0.99, 5.0}}, {"b", {50.0, 0.90, 5.0}}, {"c", {50.0, 0.80, 9.0}}};
  CHECK(front_of(three, {Better::Lower, Better::Higher, Better::Higher}) == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("pareto: equal points both stay on the front, and bad objectives are refused", "[pareto]") {
  const std::vector<ParetoPoint> points = {{"a", {1.0, 2.0}}, {"b", {1.0, 2.0}}, {"c", {1.0, 3.0}}};
  CHECK(front_of(points, {Better::Lower, Better::Lower}) == std::vector<std::string>{"a", "b"});
  CHECK(pareto_front({}, {Better::Lower}).on_front.empty());
  CHECK_THROWS_AS(pareto_front(points, {Better::Lower, Better::None}), std::invalid_argument);
  CHECK_THROWS_AS(pareto_front(points, {Better::Lower}), std::invalid_argument);
}
