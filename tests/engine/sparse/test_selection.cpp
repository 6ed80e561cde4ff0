#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "sparse/selection.h"

using namespace kv;

namespace {

std::vector<std::vector<float>> random_scores(int heads, int pages, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-5.0f, 5.0f);
  std::vector<std::vector<float>> s(static_cast<std::size_t>(heads), std::vector<float>(static_cast<std::size_t>(pages)));
  for (auto& h : s)
    for (float& x : h) x = u(rng);
  return s;
}

SparsePolicy policy(Selector selector, float budget, int sinks = 4, int window = 64) {
  SparsePolicy p;
  p.selector = selector;
  p.budget = selector == Selector::Full || selector == Selector::Window ? 0.0f : budget;
  p.sinks = sinks;
  p.window = window;
  return p;
}

}  // namespace

TEST_CASE("Sinks and window are always kept and the budget is respected", "[sparse]") {
  std::uint32_t seed = 1;
  for (Selector sel : {Selector::Quest, Selector::H2O, Selector::Recency, Selector::Hybrid}) {
    for (int ctx : {1, 16, 17, 100, 1000, 4097}) {
      for (float budget : {0.01f, 0.1f, 0.5f, 1.0f}) {
        const int page_tokens = 16, heads = 3;
        const int pages = (ctx + page_tokens - 1) / page_tokens;
        const auto bound = random_scores(heads, pages, seed++);
        const auto acc = random_scores(heads, pages, seed++);
        const SelectionPlan plan = plan_selection(policy(sel, budget), {ctx, page_tokens, heads, &bound, &acc});
        CAPTURE(selector_name(sel), ctx, budget);
        REQUIRE(plan.total_pages == pages);
        for (int h = 0; h < heads; ++h) {
          const auto& sel_pages = plan.heads[static_cast<std::size_t>(h)].pages;
          REQUIRE(std::is_sorted(sel_pages.begin(), sel_pages.end()));
          REQUIRE(static_cast<int>(sel_pages.size()) == std::min(pages, plan.budget_pages));
          REQUIRE(sel_pages.front() == 0);  // the sink page
          for (int p = std::max(0, ctx - 64) / page_tokens; p < pages; ++p) {
            REQUIRE(std::binary_search(sel_pages.begin(), sel_pages.end(), p));  // the window
          }
        }
      }
    }
  }
}

TEST_CASE("A plan made on a thread pool is the plan made on one thread", "[sparse]") {
  ThreadPool pool(3);
  std::uint32_t seed = 500;
  for (Selector sel : {Selector::Quest, Selector::H2O, Selector::Recency, Selector::Hybrid, Selector::Window, Selector::Full}) {
    for (int ctx : {100, 16 * 300, 16 * 1024 + 5}) {  // below and above the parallel threshold
      const int page_tokens = 16, heads = 8;
      const int pages = (ctx + page_tokens - 1) / page_tokens;
      const auto bound = random_scores(heads, pages, seed++);
      auto acc = random_scores(heads, pages, seed++);
      acc[1] = acc[0];  // ties break the same way too
      const SelectionInput input{ctx, page_tokens, heads, &bound, &acc};
      const SelectionPlan one = plan_selection(policy(sel, 0.1f), input);
      const SelectionPlan many = plan_selection(policy(sel, 0.1f), input, &pool);
      CAPTURE(selector_name(sel), ctx);
      REQUIRE(many.budget_pages == one.budget_pages);
      for (int h = 0; h < heads; ++h) {
        const HeadSelection &a = one.heads[static_cast<std::size_t>(h)], &b = many.heads[static_cast<std::size_t>(h)];
        REQUIRE(a.pages == b.pages);
        REQUIRE(a.reasons == b.reasons);
        REQUIRE(a.middle_scores == b.middle_scores);
      }
    }
  }
  // A missing input throws on the calling thread, before any head is planned.
  REQUIRE_THROWS_WITH(plan_selection(policy(Selector::Hybrid, 0.1f), {16 * 1024, 16, 8, nullptr, nullptr}, &pool),
                      Catch::Contains("query_bound"));
}

TEST_CASE("Selectors rank middle pages by their own score", "[sparse]") {
  const int ctx = 64 * 16, page_tokens = 16;  // 64 pages; forced: page 0 and the last 4
  std::vector<std::vector<float>> bound(1, std::vector<float>(64, 0.0f)), acc = bound;
  bound[0][10] = 9.0f;
  bound[0][20] = 8.0f;
  acc[0][30] = 5.0f;
  acc[0][40] = 4.0f;
  auto kept = [&](Selector s, int budget_pages) {
    SparsePolicy p = policy(s, 0.0f);
    p.budget_pages = budget_pages;
    return plan_selection(p, {ctx, page_tokens, 1, &bound, &acc}).heads[0].pages;
  };
  CHECK(kept(Selector::Quest, 7) == std::vector<int>{0, 10, 20, 60, 61, 62, 63});
  CHECK(kept(Selector::H2O, 7) == std::vector<int>{0, 30, 40, 60, 61, 62, 63});
  CHECK(kept(Selector::Recency, 7) == std::vector<int>{0, 58, 59, 60, 61, 62, 63});
  const auto hybrid = kept(Selector::Hybrid, 9);
  for (int p : {10, 20, 30, 40}) CHECK(std::count(hybrid.begin(), hybrid.end(), p) == 1);
  CHECK(plan_selection(policy(Selector::Window, 0.0f), {ctx, page_tokens, 1, nullptr, nullptr}).heads[0].pages ==
        std::vector<int>{0, 60, 61, 62, 63});
  CHECK(plan_selection(policy(Selector::Full, 0.0f), {ctx, page_tokens, 1, nullptr, nullptr}).heads[0].pages.size() == 64);
  CHECK_THROWS_WITH(plan_selection(policy(Selector::Quest, 0.5f), {ctx, page_tokens, 1, nullptr, nullptr}),
                    Catch::Contains("query_bound"));
}
