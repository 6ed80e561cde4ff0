#include "sparse/selection.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>

#include "runtime/error.h"

namespace kv {

int budget_in_pages(const SparsePolicy& policy, int pages) {
  if (!policy.needs_budget()) return pages;
  const int budget = policy.budget_pages > 0 ? policy.budget_pages
                                             : static_cast<int>(std::ceil(static_cast<double>(policy.budget) * pages - 1e-9));
  return std::clamp(budget, 1, pages);
}

PinnedPages pinned_pages(const SparsePolicy& policy, int context_tokens, int page_tokens) {
  KV_ASSERT(page_tokens > 0 && context_tokens >= 0, "pinned pages shape");
  PinnedPages pinned;
  pinned.pages = (context_tokens + page_tokens - 1) / page_tokens;
  pinned.sink_pages = policy.sinks > 0 ? (std::min(policy.sinks, context_tokens) + page_tokens - 1) / page_tokens : 0;
  pinned.window_first = std::max(0, context_tokens - policy.window) / page_tokens;
  return pinned;
}

bool budget_keeps_no_middle_page(const SparsePolicy& policy, const PinnedPages& pinned) {
  return policy.needs_budget() && pinned.middle() > 0 && budget_in_pages(policy, pinned.pages) <= pinned.count();
}

namespace {

// Min-max normalisation over the candidate pages: value -> (value - lo) * scale, 0 when all equal.
struct Normaliser {
  float lo = 0.0f, scale = 0.0f;
  Normaliser(const std::vector<float>& values, const std::vector<int>& candidates) {
    if (candidates.empty()) return;
    lo = values[static_cast<std::size_t>(candidates[0])];
    float hi = lo;
    for (int p : candidates) {
      lo = std::min(lo, values[static_cast<std::size_t>(p)]);
      hi = std::max(hi, values[static_cast<std::size_t>(p)]);
    }
    scale = hi > lo ? 1.0f / (hi - lo) : 0.0f;
  }
  float operator()(float value) const { return scale > 0.0f ? (value - lo) * scale : 0.0f; }
};

const std::vector<float>& component(const std::vector<std::vector<float>>* source, int head, int pages, const char* name) {
  if (source == nullptr || static_cast<int>(source->size()) <= head ||
      static_cast<int>((*source)[static_cast<std::size_t>(head)].size()) != pages) {
    throw InputError("plan_selection", name, "missing or not one value per page for this selector");
  }
  return (*source)[static_cast<std::size_t>(head)];
}

// One flag a page for the images' pages; an image outside the context, out of order or
// overlapping the one before is the caller's error.
std::vector<std::uint8_t> visual_mask(const std::vector<ImagePages>& images, int pages) {
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(pages), 0);
  int previous_last = 0;
  for (const ImagePages& image : images) {
    if (image.first < previous_last || image.last <= image.first || image.last > pages) {
      throw InputError("plan_selection", "images",
                       "pages [" + std::to_string(image.first) + ", " + std::to_string(image.last) + ") are not ascending, apart and inside the " +
                           std::to_string(pages) + " pages of the context");
    }
    std::fill(mask.begin() + image.first, mask.begin() + image.last, std::uint8_t{1});
    previous_last = image.last;
  }
  return mask;
}

}  // namespace

SelectionPlan plan_selection(const SparsePolicy& policy, const SelectionInput& in, ThreadPool* pool) {
  KV_ASSERT(in.page_tokens > 0 && in.kv_heads > 0 && in.context_tokens >= 0, "selection input shape");
  SelectionPlan plan;
  const PinnedPages pinned = pinned_pages(policy, in.context_tokens, in.page_tokens);
  const int pages = pinned.pages;
  plan.total_pages = pages;
  plan.heads.resize(static_cast<std::size_t>(in.kv_heads));
  if (pages == 0) return plan;
  const std::vector<ImagePages> no_images;
  const std::vector<ImagePages>& images = policy.visual.enabled() && in.images != nullptr ? *in.images : no_images;
  if (!images.empty()) plan.visual = visual_mask(images, pages);
  // Forced pages: those holding a sink token or overlapping the window (image pages are never
  // recent text: the window does not force them).
  std::vector<KeepReason> forced(static_cast<std::size_t>(pages), KeepReason::Score);
  std::vector<std::uint8_t> is_forced(static_cast<std::size_t>(pages), 0);
  for (int p = 0; p < pinned.sink_pages; ++p) is_forced[static_cast<std::size_t>(p)] = 1, forced[static_cast<std::size_t>(p)] = KeepReason::Sink;
  for (int p = pinned.window_first; p < pages; ++p) {
    if (plan.is_visual(p)) continue;
    if (is_forced[static_cast<std::size_t>(p)] == 0) forced[static_cast<std::size_t>(p)] = KeepReason::Window;
    is_forced[static_cast<std::size_t>(p)] = 1;
  }
  const int forced_count = static_cast<int>(std::count(is_forced.begin(), is_forced.end(), std::uint8_t{1}));
  const int image_pages = static_cast<int>(std::count(plan.visual.begin(), plan.visual.end(), std::uint8_t{1}));
  const int text_pages = pages - image_pages;
  const int budget = policy.selector == Selector::Full ? pages
                     : policy.selector == Selector::Window ? forced_count
                                                           : std::max(std::min(budget_in_pages(policy, pages), text_pages), forced_count);
  plan.budget_pages = budget;
  std::vector<int> middle;
  for (int p = 0; p < pages; ++p) {
    if (is_forced[static_cast<std::size_t>(p)] == 0 && !plan.is_visual(p)) middle.push_back(p);
  }
  // Each image's own budget, less its pages already forced (a sink page).
  std::vector<int> image_take;
  for (const ImagePages& image : images) {
    int kept_forced = 0;
    for (int p = image.first; p < image.last; ++p) kept_forced += is_forced[static_cast<std::size_t>(p)];
    const int image_budget = visual_pages_kept(policy.visual, image.count());
    image_take.push_back(std::max(0, image_budget - kept_forced));
    plan.visual_budget_pages += std::max(kept_forced, image_budget);
  }
  std::vector<float> recency(static_cast<std::size_t>(pages));
  std::iota(recency.begin(), recency.end(), 0.0f);
  const Normaliser recency_norm(recency, middle);
  // Every head's inputs are checked before any head is planned (a task must not throw).
  std::vector<const std::vector<float>*> bounds(plan.heads.size()), accumulated(plan.heads.size());
  const bool quest = policy.selector == Selector::Quest || policy.selector == Selector::Hybrid;
  const bool h2o = policy.selector == Selector::H2O || policy.selector == Selector::Hybrid;
  for (int h = 0; h < in.kv_heads; ++h) {
    if (quest || !images.empty()) bounds[static_cast<std::size_t>(h)] = &component(in.query_bound, h, pages, "query_bound");
    if (h2o) accumulated[static_cast<std::size_t>(h)] = &component(in.accumulated, h, pages, "accumulated");
  }
  // The `extra` best middle pages: highest score first, ties to the more recent page (a total
  // order, so the kept set is deterministic). Only the set matters, not its order.
  const int extra = policy.selector == Selector::Full ? static_cast<int>(middle.size()) : budget - forced_count;
  const int take = std::min(extra, static_cast<int>(middle.size()));
  auto plan_head = [&](std::size_t h) {
    const std::vector<float>* score = &recency;  // full, window, recency
    std::vector<float> hybrid;
    if (policy.selector == Selector::Quest) score = bounds[h];
    if (policy.selector == Selector::H2O) score = accumulated[h];
    if (policy.selector == Selector::Hybrid) {
      const auto& acc = *accumulated[h];
      const auto& bound = *bounds[h];
      const Normaliser acc_norm(acc, middle), bound_norm(bound, middle);
      hybrid.assign(static_cast<std::size_t>(pages), 0.0f);
      for (int p : middle) {
        const auto i = static_cast<std::size_t>(p);
        hybrid[i] = policy.alpha * acc_norm(acc[i]) + policy.beta * recency_norm(recency[i]) + policy.gamma * bound_norm(bound[i]);
      }
      score = &hybrid;
    }
    const float* value = score->data();
    std::vector<int> ranked = middle;
    const auto better = [value](int a, int b) {
      const float sa = value[a], sb = value[b];
      return sa != sb ? sa > sb : a > b;
    };
    if (take > 0 && take < static_cast<int>(ranked.size())) std::nth_element(ranked.begin(), ranked.begin() + (take - 1), ranked.end(), better);
    std::vector<std::uint8_t> keep = is_forced;
    for (int i = 0; i < take; ++i) keep[static_cast<std::size_t>(ranked[static_cast<std::size_t>(i)])] = 1;
    // Each image: its best pages by the query bound, ties to the later page.
    const float* bound = images.empty() ? nullptr : bounds[h]->data();
    for (std::size_t i = 0; i < images.size(); ++i) {
      const auto by_bound = [bound](int a, int b) { return bound[a] != bound[b] ? bound[a] > bound[b] : a > b; };
      std::vector<int> candidates;
      for (int p = images[i].first; p < images[i].last; ++p) {
        if (is_forced[static_cast<std::size_t>(p)] == 0) candidates.push_back(p);
      }
      const int image_keep = std::min(image_take[i], static_cast<int>(candidates.size()));
      if (image_keep > 0 && image_keep < static_cast<int>(candidates.size())) {
        std::nth_element(candidates.begin(), candidates.begin() + (image_keep - 1), candidates.end(), by_bound);
      }
      for (int k = 0; k < image_keep; ++k) keep[static_cast<std::size_t>(candidates[static_cast<std::size_t>(k)])] = 1;
    }
    HeadSelection& sel = plan.heads[h];
    sel.middle_scores.resize(middle.size());
    for (std::size_t i = 0; i < middle.size(); ++i) sel.middle_scores[i] = value[middle[i]];
    sel.pages.reserve(static_cast<std::size_t>(budget + plan.visual_budget_pages));
    sel.reasons.reserve(static_cast<std::size_t>(budget + plan.visual_budget_pages));
    for (int p = 0; p < pages; ++p) {
      if (keep[static_cast<std::size_t>(p)] == 0) continue;
      sel.pages.push_back(p);
      sel.reasons.push_back(is_forced[static_cast<std::size_t>(p)] != 0 ? forced[static_cast<std::size_t>(p)]
                            : plan.is_visual(p)                      ? KeepReason::Visual
                                                                     : KeepReason::Score);
    }
  };
  // A short plan costs less than waking a worker.
  constexpr std::size_t kParallelMiddlePages = 256;
  if (pool != nullptr && middle.size() >= kParallelMiddlePages) {
    pool->parallel_for(plan.heads.size(), plan_head);
  } else {
    for (std::size_t h = 0; h < plan.heads.size(); ++h) plan_head(h);
  }
  return plan;
}

}  // namespace kv
