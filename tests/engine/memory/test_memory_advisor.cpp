// The memory advisor: a step's selection records from a plan (forced pages are not middle pages;
// no plan: every page read), the predicted pages in the order the pool needs them (this step's
// pages of every head first, then each head's predictions interleaved by rank, residual pages
// left out), pins on the sink and window pages that follow the window as it moves (none without
// an L1 cap), importance set or accumulated with decay, and a history kept lookahead + 1 long.
#include <catch2/catch.hpp>

#include <algorithm>
#include <deque>

#include "memory/memory_advisor.h"
#include "memory/placement.h"
#include "test_support.h"

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

TEST_CASE("predicted pages stay within each head's share of the room, this step's pages first", "[memory][advisor]") {
  const std::vector<PageId> head0{10, 11, 12, 13, 14, 15}, head1{20, 21, 22, 23, 24, 25};
  std::deque<std::vector<SelectionRecord>> history;
  history.push_back({{{0, 1}, {1, 2, 3, 4, 5}, {0.9f, 0.8f, 0.7f, 0.6f, 0.5f}}, {{0, 2}, {1, 2, 3, 4, 5}, {0.1f, 0.9f, 0.8f, 0.7f, 0.6f}}});
  history.push_back({{{0, 3}, {1, 2, 3, 4, 5}, {0.9f, 0.8f, 0.7f, 0.6f, 0.5f}}, {{0, 4}, {1, 2, 3, 4, 5}, {0.1f, 0.9f, 0.8f, 0.7f, 0.6f}}});
  const auto wide = predicted_pages(history, 2, {&head0, &head1});
  const auto capped_at_3 = predicted_pages(history, 2, {&head0, &head1}, 3);
  // Kept pages (two per head) and one prediction each: the head's best.
  REQUIRE(wide.size() > 6);
  CHECK(capped_at_3 == std::vector<PageId>(wide.begin(), wide.begin() + 6));
  // A share below the kept pages still keeps them (they were read this step): no prediction.
  CHECK(predicted_pages(history, 2, {&head0, &head1}, 1) == std::vector<PageId>{10, 13, 20, 24});
}

TEST_CASE("a load is unpredictable only when no earlier query kept its page or ranked it within the budget", "[memory][advisor]") {
  // One head, 8 logical pages with ids 100 + p; budget 2 pages; page 0 is the sink, 7 the window.
  const std::vector<PageId> head{100, 101, 102, 103, 104, 105, 106, 107};
  const auto plan = [](std::vector<int> kept, std::vector<float> middle_scores) {
    SelectionPlan p;
    p.total_pages = 8;
    p.budget_pages = 2;
    HeadSelection h;
    h.pages = kept;
    for (int page : kept) h.reasons.push_back(page == 0 ? KeepReason::Sink : page == 7 ? KeepReason::Window : KeepReason::Score);
    h.middle_scores = std::move(middle_scores);  // pages 1..6
    p.heads.push_back(h);
    return p;
  };
  std::vector<std::vector<std::uint8_t>> ranked;
  // Step 1 keeps 1 and 2; page 3 ranks third (outside the budget), 5 fourth.
  const SelectionPlan first = plan({0, 1, 2, 7}, {0.9f, 0.8f, 0.5f, 0.1f, 0.4f, 0.0f});
  // Every load of the first plan is unpredictable (nothing came before it) but the kept ones.
  CHECK(MemoryAdvisor::unpredictable_loads(ranked, &first, {&head}, {101, 102}) == 2);
  // Step 2 keeps 1 and 3 and loads both: 1 was kept before; 3 never ranked within 2 pages.
  const SelectionPlan second = plan({0, 1, 3, 7}, {0.9f, 0.1f, 0.8f, 0.0f, 0.0f, 0.0f});
  CHECK(MemoryAdvisor::unpredictable_loads(ranked, &second, {&head}, {101, 103}) == 1);
  // Step 3 loads 3 again (ranked at step 2): predictable. Loads of pages it did not keep
  // (another head's, say) are not its to judge.
  const SelectionPlan third = plan({0, 3, 4, 7}, {0.0f, 0.1f, 0.9f, 0.8f, 0.0f, 0.0f});
  CHECK(MemoryAdvisor::unpredictable_loads(ranked, &third, {&head}, {103, 104, 555}) == 1);  // 4 is new
  CHECK(MemoryAdvisor::unpredictable_loads(ranked, nullptr, {&head}, {105}) == 0);  // no plan: every page read
}

TEST_CASE("selection churn counts each head's kept sealed pages its previous step did not keep", "[memory][advisor]") {
  // Two heads of 6 sealed pages; logical pages 6 and 7 are residual (always read, never counted).
  const std::vector<PageId> a{10, 11, 12, 13, 14, 15}, b{20, 21, 22, 23, 24, 25};
  const auto plan = [](std::vector<int> head0, std::vector<int> head1) {
    SelectionPlan p;
    p.total_pages = 8;
    p.budget_pages = 2;
    p.heads.resize(2);
    p.heads[0].pages = std::move(head0);
    p.heads[1].pages = std::move(head1);
    return p;
  };
  std::vector<std::vector<int>> last;
  SelectionChurn churn = selection_churn(last, plan({0, 1, 2, 7}, {0, 3, 4, 6, 7}), {&a, &b});
  CHECK_FALSE(churn.compared);  // the first step has nothing to compare with
  CHECK(churn.new_pages() == 0);
  CHECK(churn.kept_pages == 6);
  churn = selection_churn(last, plan({0, 1, 3, 7}, {0, 4, 5, 7}), {&a, &b});
  CHECK(churn.compared);
  CHECK(churn.new_pages() == 2);  // head 0's page 3, head 1's page 5
  CHECK(churn.kept_pages == 6);
  CHECK(churn.taken_up == std::vector<std::vector<int>>{{3}, {5}});
  churn = selection_churn(last, plan({0, 1, 3, 6, 7}, {0, 4, 5}), {&a, &b});
  CHECK(churn.new_pages() == 0);
  CHECK(churn.kept_pages == 6);
  CHECK(last == std::vector<std::vector<int>>{{0, 1, 3}, {0, 4, 5}});
}

TEST_CASE("the next layer is predicted to read the pages this layer took up, head by head", "[memory][advisor]") {
  // The next layer's heads: 4 sealed pages for head 0, 3 for head 1 (it has not appended this
  // step's token yet, so this layer's newest sealed page 3 of head 1 is not its page).
  const std::vector<PageId> a{40, 41, 42, 43}, b{50, 51, 52};
  const std::vector<std::vector<int>> taken_up{{1, 2, 3}, {0, 3}};
  CHECK(next_layer_pages(taken_up, {&a, &b}) == std::vector<PageId>{41, 50, 42, 43});  // by position, head by head
  CHECK(next_layer_pages(taken_up, {&a, &b}, 1) == std::vector<PageId>{41, 50});      // at most one per head
  CHECK(next_layer_pages({}, {&a, &b}).empty());                                     // nothing taken up
}

namespace {

constexpr std::size_t kPage = 4096;

MemoryConfig capped() {
  MemoryConfig c;
  c.l1_bytes = 64 * kPage;
  c.pin_sink_tokens = 4;
  c.pin_window_tokens = 64;
  c.importance_decay = 0.5f;
  return c;
}

}  // namespace

TEST_CASE("the advisor pins the sink and window pages and follows the window", "[memory][advisor]") {
  const MemoryConfig config = capped();
  TieredPool pool(kPage, 64, config);
  const MemoryAdvisor advisor(pool, config, 16);
  std::vector<PageId> sealed;
  for (int p = 0; p < 8; ++p) sealed.push_back(pool.allocate());
  std::vector<PagePin> pins(sealed.size());
  advisor.update_pins(8 * 16, sealed, pins);  // window: tokens 64..127, pages 4..7
  for (std::size_t p = 0; p < sealed.size(); ++p) CHECK(pool.pinned(sealed[p]) == (p == 0 || p >= 4));
  sealed.push_back(pool.allocate());
  pins.emplace_back();
  advisor.update_pins(9 * 16, sealed, pins);  // window moves on by a page: page 4 is let go
  for (std::size_t p = 0; p < sealed.size(); ++p) CHECK(pool.pinned(sealed[p]) == (p == 0 || p >= 5));
  pins.clear();
  CHECK(pool.pinned_bytes() == 0);

  MemoryConfig uncapped = config;
  uncapped.l1_bytes = 0;
  const MemoryAdvisor free_advisor(pool, uncapped, 16);
  std::vector<PagePin> none(sealed.size());
  free_advisor.update_pins(9 * 16, sealed, none);
  CHECK(pool.pinned_bytes() == 0);  // nothing is ever demoted, so nothing is pinned
}

TEST_CASE("the advisor's window pins text pages only: an image's read-only pages are never recent", "[memory][advisor]") {
  const MemoryConfig config = capped();
  TieredPool pool(kPage, 64, config);
  const MemoryAdvisor advisor(pool, config, 16);
  std::vector<PageId> sealed;
  for (int p = 0; p < 8; ++p) sealed.push_back(pool.allocate());
  pool.seal_read_only(sealed[5]);
  pool.seal_read_only(sealed[6]);
  std::vector<PagePin> pins(sealed.size());
  advisor.update_pins(8 * 16, sealed, pins);  // window: pages 4..7, of which 5 and 6 are an image's
  for (std::size_t p = 0; p < sealed.size(); ++p) CHECK(pool.pinned(sealed[p]) == (p == 0 || p == 4 || p == 7));
  pool.seal_read_only(sealed[0]);
  advisor.update_pins(8 * 16, sealed, pins);
  CHECK(pool.pinned(sealed[0]));  // a sink stays a sink
}

TEST_CASE("the advisor sets importance or accumulates attention mass with decay", "[memory][advisor]") {
  const MemoryConfig config = capped();
  TieredPool pool(kPage, 64, config);
  const MemoryAdvisor advisor(pool, config, 16);
  const std::vector<PageId> sealed{pool.allocate(), pool.allocate()};
  advisor.set_importance(sealed, {3.0f});  // shorter than the pages: the rest untouched
  CHECK(pool.importance(sealed[0]) == 3.0f);
  CHECK(pool.importance(sealed[1]) == 0.0f);
  advisor.add_mass(sealed[0], 1.0f);  // decays by half first
  CHECK(pool.importance(sealed[0]) == 2.5f);
  advisor.add_mass(sealed[1], 2.0f);
  CHECK(pool.importance(sealed[1]) == 2.0f);
}

TEST_CASE("the advisor predicts only with an L2 tier and keeps lookahead + 1 steps of history", "[memory][advisor]") {
  MemoryConfig config = capped();
  TieredPool no_l2(kPage, 64, config);
  const MemoryAdvisor without(no_l2, config, 16);
  CHECK_FALSE(without.predicts());
  std::deque<std::vector<SelectionRecord>> history;
  const std::vector<PageId> head{no_l2.allocate()};
  CHECK(without.predict(history, nullptr, 1, {&head}).empty());
  CHECK(history.empty());

  kvtest::TempDir dir("advisor");
  config.l2.dir = dir.path;
  config.prefetch_lookahead = 2;
  TieredPool pool(kPage, 4096, config);
  const MemoryAdvisor advisor(pool, config, 16);
  REQUIRE(advisor.predicts());
  const std::vector<PageId> pages{pool.allocate(), pool.allocate(), pool.allocate()};
  for (int step = 0; step < 5; ++step) {
    const std::vector<PageId> predicted = advisor.predict(history, nullptr, 3, {&pages});
    CHECK(predicted == pages);  // every page read, every page predicted
  }
  CHECK(history.size() == 3);
}
