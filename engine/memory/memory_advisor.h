// What the cache advises the memory pool: which pages stay in L1 whatever happens (pins on the
// sink and window pages, as handles), how important each page is after a decode step (demotion
// ranks pages by it) and which pages the next steps will likely read (prefetched, and demoted
// last). Predictions are pure functions over the step's plan and the selection history; the
// cache keeps the history per (sequence, layer) and hands the result to TieredPool.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "memory/page_pin.h"
#include "memory/page_pool.h"
#include "memory/tiered_pool.h"
#include "selection_plan.h"

namespace kv {

// One decode step's selection per kv head: the plan's kept pages and its middle (scored) pages
// with their scores; without a plan, every one of `pages` pages was read.
std::vector<SelectionRecord> selection_records(const SelectionPlan* plan, std::size_t heads, int pages);

// The pages to keep close for the next steps, most likely first: every head's pages of this
// step (a selection mostly persists), then each head's prefetch predictions (plan_prefetch over
// `history`, oldest step first), interleaved by rank so every head gets its best first.
// sealed[h]: kv head h's sealed pages in logical order (residual pages are not the pool's).
// At most max_per_head pages per kv head, its pages of this step included.
std::vector<PageId> predicted_pages(const std::deque<std::vector<SelectionRecord>>& history, int lookahead,
                                    const std::vector<const std::vector<PageId>*>& sealed,
                                    std::size_t max_per_head = SIZE_MAX);

// How much of a decode step's selection is new: per kv head, the kept sealed pages its previous
// decode step did not keep, summed over heads. `last_kept` (per head, logical pages ascending)
// becomes this step's; `compared` says whether there was a previous step to compare with.
struct SelectionChurn {
  std::uint64_t kept_pages = 0;
  bool compared = false;
  // Per kv head: the new pages themselves, ascending (all empty when not compared).
  std::vector<std::vector<int>> taken_up;
  std::uint64_t new_pages() const {
    std::uint64_t n = 0;
    for (const std::vector<int>& head : taken_up) n += head.size();
    return n;
  }
};
SelectionChurn selection_churn(std::vector<std::vector<int>>& last_kept, const SelectionPlan& plan,
                               const std::vector<const std::vector<PageId>*>& sealed);

// The pages the next layer is predicted to read in the same decode step: the pages this layer's
// selection took up (SelectionChurn::taken_up, per kv head), as the next layer's pages of the
// same kv head and position. Adjacent layers attend to overlapping keys (`kvbench attn-stats`,
// next_layer_overlap), so a question switch one layer saw predicts the next layer's before its
// own history can (NextLayerAgreement says whether it does). Interleaved by position so every
// head gets its first pages; at most max_per_head per kv head. next_sealed[h]: the next layer's
// kv head h, sealed pages in order.
std::vector<PageId> next_layer_pages(const std::vector<std::vector<int>>& taken_up,
                                     const std::vector<const std::vector<PageId>*>& next_sealed, std::size_t max_per_head = SIZE_MAX);

class MemoryAdvisor {
 public:
  // layers: the cache's layers, which share the pool's room.
  MemoryAdvisor(TieredPool& pool, const MemoryConfig& config, int page_tokens, int layers = 1)
      : pool_(pool), config_(config), page_tokens_(page_tokens), layers_(layers) {}

  // One kv head of `length` tokens: its sealed pages holding a sink token (the first
  // pin_sink_tokens) or overlapping the window (the last pin_window_tokens; an image's read-only
  // pages never count as recent) are pinned, the others not. Without an L1 cap nothing is ever
  // demoted, and nothing is pinned.
  void update_pins(int length, const std::vector<PageId>& sealed, std::vector<PagePin>& pins) const;
  // After a decode step: a head's pages take the selector's importance (its step's mass
  // included), `given[p]` for logical page p.
  void set_importance(const std::vector<PageId>& sealed, const std::vector<float>& given) const;
  // After a decode step without a selector: an attended page's attention mass joins its
  // importance, which decays first (memory.importance_decay).
  void add_mass(PageId page, float mass) const;
  // Whether predict() predicts: an L2 tier to prefetch from and a lookahead.
  bool predicts() const { return pool_.l2_enabled() && config_.prefetch_lookahead > 0; }
  // After a decode step: records the step's selection (plan, or all `pages` pages read) in
  // `history` (kept lookahead + 1 steps long) and returns the pages predicted for the next
  // steps (predicted_pages); none without an L2 tier or lookahead.
  std::vector<PageId> predict(std::deque<std::vector<SelectionRecord>>& history, const SelectionPlan* plan, int pages,
                              const std::vector<const std::vector<PageId>*>& sealed) const;
  // After a decode step of a layer with a next one: that layer's pages for this step
  // (next_layer_pages), each head within its share of the L1 room like predict(); none
  // without an L2 tier or lookahead.
  std::vector<PageId> predict_next_layer(const std::vector<std::vector<int>>& taken_up,
                                         const std::vector<const std::vector<PageId>*>& next_sealed) const;

  // Of the pages a step loaded on demand (`loaded`), those no earlier query could predict: its
  // plan kept them and no earlier query of the same kv head kept them or ranked them within
  // the step's budget in pages (`ranked`, per head and logical page). Then the step's own
  // ranking joins `ranked`. Without a plan every page was read and none is unpredictable.
  static std::uint64_t unpredictable_loads(std::vector<std::vector<std::uint8_t>>& ranked, const SelectionPlan* plan,
                                           const std::vector<const std::vector<PageId>*>& sealed, std::vector<PageId> loaded);
  // Marks the plan's kept pages and each head's top budget_pages middle pages as ranked.
  static void remember_ranking(std::vector<std::vector<std::uint8_t>>& ranked, const SelectionPlan& plan);

 private:
  TieredPool& pool_;
  const MemoryConfig& config_;
  int page_tokens_;
  int layers_;

  // Pages each (layer, kv head) may hold of the L1 room above what stays anyway.
  std::size_t room_share(std::size_t heads) const;
};

}  // namespace kv
