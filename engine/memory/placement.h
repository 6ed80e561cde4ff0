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
  bool image = false;         // an image's read-only page: when predicted, after every other page
};

// Retention of a page: importance plus a recency term 1 / (1 + age in steps), so a page that
// was never important leaves before one that was, and among equals the older leaves first.
double retention(const DemotionCandidate& page, std::uint64_t now);

// The lowest-retention pages whose bytes add up to at least bytes_to_free (at most
// max_pages), pages predicted for the next step last and predicted image pages after them; ties
// go to clean pages (no write), then to the older page, then the lower id.
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

// How well one layer's newly selected pages foretell the next layer's reads in the same decode
// step: of the pages layer l took up (kept now, not at its previous step), the share layer l+1
// read, as sums decayed by kAgreementDecay a step. Learned from the selections alone, whether or
// not anything was prefetched, so it repeats exactly. Adjacent layers of a model attend to
// overlapping keys; sampled layers far apart in the model (the harness runs 8 and 24 of 32 for
// two) agree far less, and prefetching for them would mostly move pages nobody reads.
inline constexpr double kAgreementDecay = 0.9;
// A prefetch for the next layer is worth it when at least this share of it is read: the share
// left unread (at most 25%) is what the prefetch targets allow for unused bytes.
inline constexpr double kNextLayerAgreement = 0.75;
struct NextLayerAgreement {
  double offered = 0.0, read = 0.0;
  // After layer l+1's step: `taken_up` is layer l's of this step (per kv head), `plan` is
  // layer l+1's selection. Returns this step's counts.
  struct Step {
    std::size_t offered = 0, read = 0;
  };
  Step record(const std::vector<std::vector<int>>& taken_up, const SelectionPlan& plan);
  bool predicts() const { return offered > 0.0 && read >= kNextLayerAgreement * offered; }
};

}  // namespace kv
