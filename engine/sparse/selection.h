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
#pragma once

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
};

// The budget in pages for a context of `pages` pages (>= 1, <= pages; Full and Window: all /
// forced only are decided by plan_selection).
int budget_in_pages(const SparsePolicy& policy, int pages);

// With a pool, heads are planned in parallel (each head's selection depends only on its own
// inputs, so the plan is the same).
SelectionPlan plan_selection(const SparsePolicy& policy, const SelectionInput& input, ThreadPool* pool = nullptr);

}  // namespace kv
