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

TEST_CASE("demotion takes predicted pages last, and a predicted image page after every other", "[memory][placement]") {
  const std::uint64_t now = 100;
  std::vector<DemotionCandidate> pages = {
      {0, 0.0f, 10, false, 10, true, true},    // old, predicted, an image's
      {1, 5.0f, 99, false, 10, true, false},   // important, recent, predicted text
      {2, 9.0f, 99, false, 10, false, true},   // an image's, not predicted: like any page
      {3, 0.0f, 10, false, 10, false, false},  // old, unimportant
  };
  CHECK(plan_demotion(pages, now, 1000, 10) == std::vector<PageId>{3, 2, 1, 0});
  CHECK(plan_demotion(pages, now, 30, 10) == std::vector<PageId>{3, 2, 1});
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

TEST_CASE("the next layer is predicted from this one's take-up only while it reads most of it", "[memory][placement]") {
  const auto plan = [](std::vector<int> head0, std::vector<int> head1) {
    SelectionPlan p;
    p.heads.resize(2);
    p.heads[0].pages = std::move(head0);
    p.heads[1].pages = std::move(head1);
    return p;
  };
  NextLayerAgreement agreement;
  CHECK_FALSE(agreement.predicts());  // nothing learned yet
  agreement.record({{}, {}}, plan({1, 2}, {3}));
  CHECK_FALSE(agreement.predicts());  // a steady selection teaches nothing
  agreement.record({{5, 6}, {7, 8}}, plan({0, 5, 6}, {7, 8, 9}));
  CHECK(agreement.offered == 4.0);
  CHECK(agreement.read == 4.0);
  CHECK(agreement.predicts());
  // A step where the next layer reads one of four: 3.6 + 1 read of 3.6 + 4 offered (0.61).
  agreement.record({{5, 6}, {7, 8}}, plan({5}, {}));
  CHECK(agreement.offered == Approx(7.6));
  CHECK(agreement.read == Approx(4.6));
  CHECK_FALSE(agreement.predicts());
  // One more where it reads all four: 8.14 of 10.84 (0.751).
  agreement.record({{5, 6}, {7, 8}}, plan({5, 6}, {7, 8}));
  CHECK(agreement.predicts());
}
