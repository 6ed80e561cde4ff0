#include "sparse/selection.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "runtime/error.h"

namespace kv {

int budget_in_pages(const SparsePolicy& policy, int pages) {
  if (!policy.needs_budget()) return pages;
  const int budget = policy.budget_pages > 0 ? policy.budget_pages
                                             : static_cast<int>(std::ceil(static_cast<double>(policy.budget) * pages - 1e-9));
  return std::clamp(budget, 1, pages);
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

}  // namespace

SelectionPlan plan_selection(const SparsePolicy& policy, const SelectionInput& in) {
  KV_ASSERT(in.page_tokens > 0 && in.kv_heads > 0 && in.context_tokens >= 0, "selection input shape");
  SelectionPlan plan;
  const int pages = (in.context_tokens + in.page_tokens - 1) / in.page_tokens;
  plan.total_pages = pages;
  plan.heads.resize(static_cast<std::size_t>(in.kv_heads));
  if (pages == 0) return plan;
  // Forced pages: those holding a sink token or overlapping the window.
  std::vector<KeepReason> forced(static_cast<std::size_t>(pages), KeepReason::Score);
  std::vector<bool> is_forced(static_cast<std::size_t>(pages), false);
  const int sink_pages = policy.sinks > 0 ? (std::min(policy.sinks, in.context_tokens) + in.page_tokens - 1) / in.page_tokens : 0;
  for (int p = 0; p < sink_pages; ++p) is_forced[static_cast<std::size_t>(p)] = true, forced[static_cast<std::size_t>(p)] = KeepReason::Sink;
  const int window_start = std::max(0, in.context_tokens - policy.window);
  for (int p = window_start / in.page_tokens; p < pages; ++p) {
    if (!is_forced[static_cast<std::size_t>(p)]) forced[static_cast<std::size_t>(p)] = KeepReason::Window;
    is_forced[static_cast<std::size_t>(p)] = true;
  }
  const int forced_count = static_cast<int>(std::count(is_forced.begin(), is_forced.end(), true));
  const int budget = policy.selector == Selector::Full ? pages
                     : policy.selector == Selector::Window ? forced_count
                                                           : std::max(budget_in_pages(policy, pages), forced_count);
  plan.budget_pages = budget;
  std::vector<int> middle;
  for (int p = 0; p < pages; ++p) {
    if (!is_forced[static_cast<std::size_t>(p)]) middle.push_back(p);
  }
  std::vector<float> recency(static_cast<std::size_t>(pages));
  std::iota(recency.begin(), recency.end(), 0.0f);
  const Normaliser recency_norm(recency, middle);
  std::vector<float> score(static_cast<std::size_t>(pages), 0.0f);
  std::vector<int> ranked;
  std::vector<bool> keep;
  for (int h = 0; h < in.kv_heads; ++h) {
    switch (policy.selector) {
      case Selector::Full:
      case Selector::Window:
      case Selector::Recency: score = recency; break;
      case Selector::Quest: score = component(in.query_bound, h, pages, "query_bound"); break;
      case Selector::H2O: score = component(in.accumulated, h, pages, "accumulated"); break;
      case Selector::Hybrid: {
        const auto& acc = component(in.accumulated, h, pages, "accumulated");
        const auto& bound = component(in.query_bound, h, pages, "query_bound");
        const Normaliser acc_norm(acc, middle), bound_norm(bound, middle);
        for (int p : middle) {
          const auto i = static_cast<std::size_t>(p);
          score[i] = policy.alpha * acc_norm(acc[i]) + policy.beta * recency_norm(recency[i]) + policy.gamma * bound_norm(bound[i]);
        }
        break;
      }
    }
    // The `extra` best middle pages: highest score first, ties to the more recent page (a
    // total order, so the kept set is deterministic). Only the set matters, not its order.
    const int extra = policy.selector == Selector::Full ? static_cast<int>(middle.size()) : budget - forced_count;
    ranked = middle;
    const auto better = [&](int a, int b) {
      const float sa = score[static_cast<std::size_t>(a)], sb = score[static_cast<std::size_t>(b)];
      return sa != sb ? sa > sb : a > b;
    };
    const int take = std::min(extra, static_cast<int>(ranked.size()));
    if (take > 0 && take < static_cast<int>(ranked.size())) std::nth_element(ranked.begin(), ranked.begin() + (take - 1), ranked.end(), better);
    keep = is_forced;
    for (int i = 0; i < take; ++i) keep[static_cast<std::size_t>(ranked[static_cast<std::size_t>(i)])] = true;
    HeadSelection& sel = plan.heads[static_cast<std::size_t>(h)];
    sel.middle_scores.reserve(middle.size());
    for (int p : middle) sel.middle_scores.push_back(score[static_cast<std::size_t>(p)]);
    for (int p = 0; p < pages; ++p) {
      if (!keep[static_cast<std::size_t>(p)]) continue;
      sel.pages.push_back(p);
      sel.reasons.push_back(is_forced[static_cast<std::size_t>(p)] ? forced[static_cast<std::size_t>(p)] : KeepReason::Score);
    }
  }
  return plan;
}

}  // namespace kv
