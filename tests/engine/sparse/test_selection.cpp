#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "runtime/error.h"
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

TEST_CASE("The pinned pages are exactly the pages a plan keeps for sinks and window", "[sparse]") {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> context(0, 3000), tokens(1, 100), page(16, 128);
  for (int trial = 0; trial < 300; ++trial) {
    const int ctx = context(rng), page_tokens = page(rng), sinks = tokens(rng) - 1, window = tokens(rng) * 3;
    const SparsePolicy window_only = policy(Selector::Window, 0.0f, sinks, window);
    const PinnedPages pinned = pinned_pages(window_only, ctx, page_tokens);
    const SelectionPlan plan = plan_selection(window_only, {ctx, page_tokens, 1, nullptr, nullptr});
    CAPTURE(ctx, page_tokens, sinks, window);
    REQUIRE(pinned.pages == plan.total_pages);
    const HeadSelection& head = plan.heads[0];
    REQUIRE(pinned.count() == static_cast<int>(head.pages.size()));
    REQUIRE(pinned.middle() == pinned.pages - static_cast<int>(head.pages.size()));
    const auto sink_kept = std::count(head.reasons.begin(), head.reasons.end(), KeepReason::Sink);
    REQUIRE(sink_kept == pinned.sink_pages);
    for (int p = pinned.window_first; p < pinned.pages; ++p) REQUIRE(std::binary_search(head.pages.begin(), head.pages.end(), p));
  }
}

TEST_CASE("A budget at or below the pinned pages keeps no middle page, and only then", "[sparse]") {
  // Pages of 64, 4 sinks, a 256-token window at 2304 tokens: 36 pages, 1 sink page and pages
  // 32..35 of the window: 5 pinned.
  SparsePolicy p = policy(Selector::Hybrid, 0.10f, 4, 256);
  const PinnedPages pinned = pinned_pages(p, 2304, 64);
  CHECK(pinned.pages == 36);
  CHECK(pinned.sink_pages == 1);
  CHECK(pinned.window_pages() == 4);
  CHECK(pinned.count() == 5);
  CHECK(budget_keeps_no_middle_page(p, pinned));  // ceil(3.6) = 4 pages
  for (Selector s : {Selector::Quest, Selector::H2O, Selector::Recency, Selector::Hybrid}) {
    p.selector = s;
    p.budget = 0.0f;
    for (int pages = 1; pages <= 8; ++pages) {
      p.budget_pages = pages;
      CHECK(budget_keeps_no_middle_page(p, pinned) == (pages <= 5));
      const std::vector<std::vector<float>> scores(1, std::vector<float>(36, 1.0f));
      const SelectionPlan plan = plan_selection(p, {2304, 64, 1, &scores, &scores});
      const auto& reasons = plan.heads[0].reasons;
      CHECK((std::count(reasons.begin(), reasons.end(), KeepReason::Score) == 0) == (pages <= 5));
    }
  }
  // Full and window selectors have no budget; a context that is all pinned has no middle page.
  CHECK_FALSE(budget_keeps_no_middle_page(policy(Selector::Window, 0.0f, 4, 256), pinned));
  CHECK_FALSE(budget_keeps_no_middle_page(policy(Selector::Full, 0.0f, 4, 256), pinned));
  const SparsePolicy small = policy(Selector::Quest, 0.01f, 4, 256);
  CHECK_FALSE(budget_keeps_no_middle_page(small, pinned_pages(small, 300, 64)));
  // Sink and window pages that overlap count once.
  const PinnedPages overlap = pinned_pages(small, 300, 64);
  CHECK(overlap.count() == overlap.pages);
}

namespace {

// 40 pages of 16 tokens: text [0, 8), image A [8, 18), text [18, 22), image B [22, 31) (its
// last page partial in the sense of the workload: it still counts whole), text [31, 40).
struct TwoImages {
  static constexpr int kPageTokens = 16, kPages = 40, kHeads = 2;
  std::vector<ImagePages> images{{8, 18}, {22, 31}};
  std::vector<int> planted{13, 25};  // one relevant page an image
  std::vector<std::vector<float>> bound, acc;

  explicit TwoImages(std::uint32_t seed) : bound(random_scores(kHeads, kPages, seed)), acc(random_scores(kHeads, kPages, seed + 1)) {
    for (auto& head : bound) {
      for (const ImagePages& image : images) {
        for (int p = image.first; p < image.last; ++p) head[static_cast<std::size_t>(p)] -= 20.0f;  // below every text page
      }
      for (int p : planted) head[static_cast<std::size_t>(p)] = -10.0f;  // the best of its image
    }
  }
  SelectionInput input(bool with_images) const {
    return {kPages * kPageTokens, kPageTokens, kHeads, &bound, &acc, with_images ? &images : nullptr};
  }
};

bool image_page(const std::vector<ImagePages>& images, int page) {
  return std::any_of(images.begin(), images.end(), [page](const ImagePages& i) { return page >= i.first && page < i.last; });
}

}  // namespace

TEST_CASE("A visual budget keeps every image's own best pages, apart from the text budget and the window", "[sparse]") {
  for (Selector sel : {Selector::Window, Selector::Quest, Selector::H2O, Selector::Recency, Selector::Hybrid}) {
    for (std::uint32_t seed : {1u, 2u, 3u, 7u}) {
      const TwoImages ctx(seed);
      SparsePolicy p = policy(sel, 0.4f, 4, 200);  // the window, pages [27, 40), reaches back into image B
      p.visual = {0.2f, 1};
      CAPTURE(selector_name(sel), seed);
      const SelectionPlan plan = plan_selection(p, ctx.input(true));
      REQUIRE(plan.visual_budget_pages == 2 + 2);  // ceil(0.2 * 10), ceil(0.2 * 9)
      // Text: 21 pages, of which the sink page and the window's 9 text pages [31, 40) are forced.
      const int text_pages = TwoImages::kPages - 19, forced = 1 + 9;
      // The text budget is the context's (16 of 40 pages), spent on text pages alone.
      REQUIRE(plan.budget_pages == (sel == Selector::Window ? forced : budget_in_pages(p, TwoImages::kPages)));
      REQUIRE(plan.budget_pages < text_pages);
      for (const HeadSelection& head : plan.heads) {
        for (std::size_t i = 0; i < ctx.images.size(); ++i) {
          const ImagePages& image = ctx.images[i];
          int kept = 0;
          for (std::size_t k = 0; k < head.pages.size(); ++k) {
            if (head.pages[k] < image.first || head.pages[k] >= image.last) continue;
            ++kept;
            REQUIRE(head.reasons[k] == KeepReason::Visual);
          }
          REQUIRE(kept == visual_pages_kept(p.visual, image.count()));
          REQUIRE(std::binary_search(head.pages.begin(), head.pages.end(), ctx.planted[i]));
        }
        // The text: the forced pages and the text budget, never an image page.
        int text_kept = 0;
        for (int page : head.pages) text_kept += image_page(ctx.images, page) ? 0 : 1;
        REQUIRE(text_kept == plan.budget_pages);
        REQUIRE(head.middle_scores.size() == static_cast<std::size_t>(text_pages - forced));
      }
    }
  }
}

TEST_CASE("A text budget larger than the text pages keeps every text page and no image page beyond the visual budget", "[sparse]") {
  const TwoImages ctx(5);
  SparsePolicy p = policy(Selector::Quest, 0.8f, 4, 64);  // 32 of 40 pages, above the 21 text pages
  p.visual = {0.1f, 1};
  const SelectionPlan plan = plan_selection(p, ctx.input(true));
  REQUIRE(plan.budget_pages == TwoImages::kPages - 19);
  for (const HeadSelection& head : plan.heads) {
    REQUIRE(head.pages.size() == static_cast<std::size_t>(plan.budget_pages + plan.visual_budget_pages));
    int text_kept = 0;
    for (int page : head.pages) text_kept += image_page(ctx.images, page) ? 0 : 1;
    REQUIRE(text_kept == TwoImages::kPages - 19);
  }
}

TEST_CASE("Without a visual budget image pages are text pages, and without images a visual budget changes nothing", "[sparse]") {
  for (Selector sel : {Selector::Quest, Selector::H2O, Selector::Hybrid}) {
    const TwoImages ctx(11);
    SparsePolicy text_only = policy(sel, 0.2f);
    SparsePolicy with_visual = text_only;
    with_visual.visual = {0.1f, 1};
    CAPTURE(selector_name(sel));
    const SelectionPlan base = plan_selection(text_only, ctx.input(false));
    for (const SelectionPlan& same : {plan_selection(text_only, ctx.input(true)), plan_selection(with_visual, ctx.input(false))}) {
      REQUIRE(same.budget_pages == base.budget_pages);
      REQUIRE(same.visual.empty());
      for (std::size_t h = 0; h < base.heads.size(); ++h) {
        REQUIRE(same.heads[h].pages == base.heads[h].pages);
        REQUIRE(same.heads[h].reasons == base.heads[h].reasons);
        REQUIRE(same.heads[h].middle_scores == base.heads[h].middle_scores);
      }
    }
  }
}

TEST_CASE("A visual budget needs the query bound, and images inside the context in order", "[sparse]") {
  const TwoImages ctx(5);
  SparsePolicy p = policy(Selector::H2O, 0.2f);
  p.visual = {0.1f, 1};
  SelectionInput no_bound = ctx.input(true);
  no_bound.query_bound = nullptr;
  CHECK_THROWS_AS(plan_selection(p, no_bound), InputError);
  for (std::vector<ImagePages> bad : {std::vector<ImagePages>{{22, 31}, {8, 18}}, std::vector<ImagePages>{{8, 18}, {17, 20}},
                                      std::vector<ImagePages>{{38, 41}}, std::vector<ImagePages>{{5, 5}}}) {
    SelectionInput in = ctx.input(true);
    in.images = &bad;
    CHECK_THROWS_AS(plan_selection(p, in), InputError);
  }
}
