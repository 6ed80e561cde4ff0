// Placement decisions as plans (values): which pages to demote from L1, which to prefetch from
// L2. They depend only on the step and the selection history, never on timing, so byte counts
// and hit rates repeat exactly for the same seed; only waits depend on the machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "memory/page_pool.h"
#include "selection_plan.h"

namespace kv {

// A resident page the controller may demote (unpinned, not used by the current step).
struct DemotionCandidate {
  PageId id = kNoPage;
  float importance = 0.0f;    // accumulated attention (decayed), from the sparse selector
  std::uint64_t last_used = 0;  // step of the last read (or of the allocation)
  bool clean = false;         // an L2 copy exists: demotion only drops the L1 copy
  std::size_t bytes = 0;
  bool predicted = false;     // the next step is predicted to read it: demoted last
};

// Retention of a page: importance plus a recency term 1 / (1 + age in steps), so a page that
// was never important leaves before one that was, and among equals the older leaves first.
double retention(const DemotionCandidate& page, std::uint64_t now);

// The lowest-retention pages whose bytes add up to at least bytes_to_free (at most
// max_pages), pages predicted for the next step last; ties go to clean pages (no write), then
// to the older page, then the lower id.
std::vector<PageId> plan_demotion(std::vector<DemotionCandidate> candidates, std::uint64_t now,
                                  std::size_t bytes_to_free, std::size_t max_pages);

// Pages the next `lookahead` steps are predicted to read, most likely first, per kv head:
// pages kept in the recent history but not now (selections oscillate), then the best-scored
// middle pages just outside this step's selection - ceil(widen x the pages the selection
// changed by per step over the history) per lookahead step, at least one. history: oldest
// first, the last entry is the current step. The default widening, 4, is where
// BM_OffloadDecode at 128K stops gaining: a narrower one misses pages the next steps load, a
// wider one adds swap-in traffic for almost no more hits (docs/performance.md).
inline constexpr double kPrefetchWidening = 4.0;
std::vector<int> plan_prefetch(const std::vector<const SelectionRecord*>& history, int lookahead,
                               double widen = kPrefetchWidening);

}  // namespace kv
