// The memory advisor's pure parts: a step's selection records from a plan (forced pages are not
// middle pages; no plan: every page read), and the predicted pages in the order the pool needs
// them (this step's pages of every head first, then each head's predictions interleaved by
// rank, residual pages left out).
#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>

#include "memory/memory_advisor.h"
#include "memory/placement.h"

using namespace kv;

TEST_CASE("selection records keep the plan's pages and its scored middle pages", "[memory][advisor]") {
  SelectionPlan plan;
  plan.total_pages = 6;
  plan.budget_pages = 3;
  plan.heads.resize(2);
  plan.heads[0] = {{0, 3, 5}, {KeepReason::Sink, KeepReason::Score, KeepReason::Window}, {0.1f, 0.2f, 0.9f, 0.4f}};
  plan.heads[1] = {{0, 2, 5}, {KeepReason::Sink, KeepReason::Score, KeepReason::Window}, {0.3f, 0.8f, 0.1f, 0.2f}};
  const auto records = selection_records(&plan, 2, 6);
  REQUIRE(records.size() == 2);
  CHECK(records[0].kept == std::vector<int>{0, 3, 5});
  CHECK(records[0].middle_pages == std::vector<int>{1, 2, 3, 4});  // 0 and 5 were forced
  CHECK(records[1].middle_scores == plan.heads[1].middle_scores);
  const auto all = selection_records(nullptr, 2, 4);
  CHECK(all[1].kept == std::vector<int>{0, 1, 2, 3});
  CHECK(all[1].middle_pages.empty());
}

TEST_CASE("predicted pages: this step's pages first, then predictions by rank, residual pages left out", "[memory][advisor]") {
  // Two heads of 6 logical pages; head h's sealed page p has id 10 * (h + 1) + p. Page 6 would
  // be a residual page (not in `sealed`).
  const std::vector<PageId> head0{10, 11, 12, 13, 14, 15}, head1{20, 21, 22, 23, 24, 25};
  std::deque<std::vector<SelectionRecord>> history;
  history.push_back({{{0, 1, 6}, {1, 2, 3, 4}, {0.1f, 0.9f, 0.8f, 0.2f}}, {{0, 4}, {1, 2, 3, 4}, {0.7f, 0.1f, 0.2f, 0.3f}}});
  history.push_back({{{0, 2, 6}, {1, 2, 3, 4}, {0.1f, 0.9f, 0.8f, 0.2f}}, {{0, 1}, {1, 2, 3, 4}, {0.7f, 0.1f, 0.2f, 0.3f}}});
  const auto predicted = predicted_pages(history, 2, {&head0, &head1});
  // This step's kept pages of each head, the residual page 6 left out.
  REQUIRE(predicted.size() >= 4);
  CHECK(std::vector<PageId>(predicted.begin(), predicted.begin() + 4) == std::vector<PageId>{10, 12, 20, 21});
  // Then each head's plan_prefetch list, interleaved by rank.
  std::vector<std::vector<int>> per_head;
  for (std::size_t h = 0; h < 2; ++h) per_head.push_back(plan_prefetch({&history[0][h], &history[1][h]}, 2));
  std::vector<PageId> expected{10, 12, 20, 21};
  for (std::size_t rank = 0; rank < std::max(per_head[0].size(), per_head[1].size()); ++rank) {
    if (rank < per_head[0].size() && per_head[0][rank] < 6) expected.push_back(head0[static_cast<std::size_t>(per_head[0][rank])]);
    if (rank < per_head[1].size() && per_head[1][rank] < 6) expected.push_back(head1[static_cast<std::size_t>(per_head[1][rank])]);
  }
  CHECK(predicted == expected);
  CHECK(predicted_pages({}, 2, {&head0, &head1}).empty());
}
