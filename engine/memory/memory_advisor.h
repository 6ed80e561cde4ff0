// What the cache advises the memory pool after each decode step: how important each page is
// (demotion ranks pages by it) and which pages the next steps will likely read (prefetched, and
// demoted last). Pure functions over the step's plan and the selection history; the cache keeps
// the history per (sequence, layer) and hands the result to TieredPool.
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

#include "memory/page_pool.h"
#include "selection_plan.h"

namespace kv {

// One decode step's selection per kv head: the plan's kept pages and its middle (scored) pages
// with their scores; without a plan, every one of `pages` pages was read.
std::vector<SelectionRecord> selection_records(const SelectionPlan* plan, std::size_t heads, int pages);

// The pages to keep close for the next steps, most likely first: every head's pages of this
// step (a selection mostly persists), then each head's prefetch predictions (plan_prefetch over
// `history`, oldest step first), interleaved by rank so every head gets its best first.
// sealed[h]: kv head h's sealed pages in logical order (residual pages are not the pool's).
std::vector<PageId> predicted_pages(const std::deque<std::vector<SelectionRecord>>& history, int lookahead,
                                    const std::vector<const std::vector<PageId>*>& sealed);

}  // namespace kv
