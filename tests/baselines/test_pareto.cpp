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

namespace {

CaseView soc_case(const std::string& policy, double kv, double error, double fits, double headroom) {
  CaseView c;
  c.name = "m/w/" + policy + "/phone";
  c.model = "m";
  c.workload = "w";
  c.policy = policy;
  c.soc = "phone";
  c.status = "complete";
  c.repetitions = 1;
  c.figures["kv_bytes_per_token"] = {kv, "", false, false};
  c.figures["attn_rel_error"] = {error, "", false, false};
  c.figures["fits_in_memory"] = {fits, "", false, false};
  c.figures["memory_headroom_bytes"] = {headroom, "", false, false};
  return c;
}

}  // namespace

TEST_CASE("pareto: a configuration that does not fit is left out and listed, or compared and marked", "[pareto]") {
  RunView view;
  // f16 would be on the front (least error) but does not fit; q8 and q4 fit.
  view.cases = {soc_case("f16", 128.0, 0.0, 0.0, -2.0 * (1 << 30)), soc_case("q8", 64.0, 0.01, 1.0, 1e9),
                soc_case("q4", 34.0, 0.05, 1.0, 2e9)};
  const std::vector<std::string> objectives = {"kv_bytes_per_token", "attn_rel_error"};
  const auto fitting = pareto_groups(view, view, objectives, "");
  REQUIRE(fitting.size() == 1);
  REQUIRE(fitting[0].points.size() == 2);
  CHECK(fitting[0].points[0].label == "q8");
  REQUIRE(fitting[0].unfit.size() == 1);
  CHECK(fitting[0].unfit[0].first == "f16");
  CHECK(fitting[0].unfit[0].second == "short of 2.00 GiB");
  const auto all = pareto_groups(view, view, objectives, "", true);
  REQUIRE(all[0].points.size() == 3);
  CHECK(all[0].point_fits == std::vector<bool>{false, true, true});
  CHECK(all[0].result.on_front[0]);  // compared, and marked by point_fits
}
