#include <catch2/catch.hpp>

#include "memory/placement.h"

using namespace kv;

TEST_CASE("demotion takes the lowest retention: unimportant and old first, clean on ties", "[memory][placement]") {
  const std::uint64_t now = 100;
  std::vector<DemotionCandidate> pages = {
      {0, 0.0f, 99, false, 10},   // recent, unimportant
      {1, 0.0f, 10, false, 10},   // old, unimportant
      {2, 5.0f, 10, false, 10},   // old but important
      {3, 0.0f, 10, true, 10},    // old, unimportant, clean (same retention as 1)
      {4, 0.2f, 100, false, 10},  // read this step
  };
  CHECK(plan_demotion(pages, now, 10, 10) == std::vector<PageId>{3});
  CHECK(plan_demotion(pages, now, 25, 10) == std::vector<PageId>{3, 1, 0});
  CHECK(plan_demotion(pages, now, 1000, 10) == std::vector<PageId>{3, 1, 0, 4, 2});
  CHECK(plan_demotion(pages, now, 1000, 2).size() == 2);
  CHECK(retention(pages[2], now) > retention(pages[4], now));
}

TEST_CASE("prefetch predicts recently dropped pages, then the best runners-up", "[memory][placement]") {
  SelectionRecord before{{0, 5, 9, 15}, {1, 2, 3, 5, 7, 9, 11}, {}};
  SelectionRecord now{{0, 5, 11, 15}, {1, 2, 3, 5, 7, 9, 11}, {0.1f, 0.9f, 0.3f, 1.0f, 0.8f, 0.5f, 0.95f}};
  // Churn is one page per step; lookahead 2: two runners-up after page 9 (dropped this step).
  CHECK(plan_prefetch({&before, &now}, 2, 1.0) == std::vector<int>{9, 2, 7});
  CHECK(plan_prefetch({&now}, 1, 1.0) == std::vector<int>{2});
  // Widened: 2 x churn per lookahead step: four runners-up.
  CHECK(plan_prefetch({&before, &now}, 2, 2.0) == std::vector<int>{9, 2, 7, 3});  // 9 counts among the four
  CHECK(plan_prefetch({&before, &now}, 0).empty());
  CHECK(plan_prefetch({}, 2).empty());
}
