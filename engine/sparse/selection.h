// Page selection as a plan: a value computed before any attention runs (testable without
// tensors, loggable), applied by attending over the planned pages only (block-sparse: dense
// inside a page).
//
// Per kv head: pages holding a sink token and pages overlapping the local window are forced;
// the budget (budget_pages, or ceil(budget * pages)) counts them and always fits them first;
// the rest of the budget goes to the middle pages with the highest score. Scores: quest = the
// query bound; h2o = accumulated attention; recency = page index; hybrid = alpha * acc + beta *
// recency + gamma * bound, each term min-max normalised over the head's middle pages so the
// weights compare like with like. GQA: one selection per kv head from the group's combined
// score (the caller passes the max bound over the group's q heads and the summed attention).
// With a visual budget, image pages are chosen per image instead (sparse/visual_budget.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "runtime/thread_pool.h"
#include "selection_plan.h"
#include "sparse/policy.h"

namespace kv {

struct SelectionInput {
  int context_tokens = 0;
  int page_tokens = 0;
  int kv_heads = 0;
  // [kv head][page]; may be empty when the selector does not read them.
  const std::vector<std::vector<float>>* query_bound = nullptr;
  const std::vector<std::vector<float>>* accumulated = nullptr;
  // The images' pages, ascending and apart. With the policy's visual budget on, each image's
  // pages are chosen apart from the text by `query_bound` (which every selector then needs),
  // the window never forces them and the text budget (still a fraction of all the context's
  // pages) is spent on the other pages alone; otherwise they are text pages.
  const std::vector<ImagePages>* images = nullptr;
};

// The pages every decode step at `context_tokens` keeps whatever the scores say: the pages
// holding a sink token, [0, sink_pages), and those overlapping the window, [window_first,
// pages); a page in both counts once. The rest are the middle pages the budget chooses among.
struct PinnedPages {
  int pages = 0;         // of the context
  int sink_pages = 0;
  int window_first = 0;  // the first page overlapping the window (a partial last page always does)

  int window_pages() const { return pages - window_first; }
  int count() const { return sink_pages + pages - std::max(window_first, sink_pages); }
  int middle() const { return pages - count(); }
};
PinnedPages pinned_pages(const SparsePolicy& policy, int context_tokens, int page_tokens);

// True when a budgeted selector's budget at this context keeps no middle page although there
// are some: the selection degenerates to sinks and window, whatever the selector.
bool budget_keeps_no_middle_page(const SparsePolicy& policy, const PinnedPages& pinned);

// The budget in pages for a context of `pages` pages (>= 1, <= pages; Full and Window: all /
// forced only are decided by plan_selection).
int budget_in_pages(const SparsePolicy& policy, int pages);

// With a pool, heads are planned in parallel (each head's selection depends only on its own
// inputs, so the plan is the same).
SelectionPlan plan_selection(const SparsePolicy& policy, const SelectionInput& input, ThreadPool* pool = nullptr);

}  // namespace kv
