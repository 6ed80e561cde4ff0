// One attention call over a sequence's pages as the cache makes it: the pages attended (a
// selection plan's, or all), compensation for the pages a plan drops, sealed pages made resident
// for the call - all at once, in waves of positions under an L1 cap, or staged through the L0
// arena - and, for decode, each attended page's attention mass. Partial results merge through
// SoftmaxState only (paged_attention, L0Stager). The cache's pages are reached through
// PageAccess, so this sits below the cache and knows nothing of its tables or tiers.
#pragma once

#include <cstddef>
#include <vector>

#include "attention/compensation.h"
#include "attention/l0_staging.h"
#include "attention/paged_attention.h"
#include "selection_plan.h"

namespace kv {

// The pages of one (sequence, layer), as one call reaches them.
class PageAccess {
 public:
  virtual std::size_t pages() const = 0;  // per kv head, sealed then residual
  virtual PageView view(std::size_t head, std::size_t page) const = 0;
  // Makes the sealed pages at positions [begin, end) of every head of `views` resident and held
  // until release(), and points their views at the bytes.
  virtual void acquire(std::vector<std::vector<PageView>>& views, std::size_t begin, std::size_t end) = 0;
  virtual void release() = 0;

 protected:
  ~PageAccess() = default;
};

struct AttendCallArgs {
  AttentionShape shape;
  const float* q = nullptr;  // [n_queries][q_heads][head_dim]
  int n_queries = 1;
  float* out = nullptr;
  int split_pages = kDefaultSplitPages;
  int context_tokens = 0;
  const SelectionPlan* plan = nullptr;
  bool compensate = false;                                    // decode with a plan only
  const std::vector<std::vector<PageView>>* views = nullptr;  // every page, when the caller has them
  std::vector<std::vector<float>>* page_mass = nullptr;       // decode only, out
  std::size_t wave_bytes = 0;   // most sealed bytes held at once; 0: no limit
  bool through_l0 = false;      // decode: stage the pages through the L0 arena
  const PageLayout* residual_layout = nullptr;  // views in it are residual pages: never acquired
  double repeat_share = 0.0;  // PagedAttentionArgs::repeat_share (test only)
};

class AttendCall {
 public:
  // l0_bytes: the L0 arena for calls through_l0 (allocated on first use).
  explicit AttendCall(std::size_t l0_bytes) : l0_(l0_bytes) {}

  // Throws InputError ("KVCache::attend", field, reason) for a plan that does not fit the
  // sequence or an option that needs a decode step; nothing is held after a failed call.
  void run(const PageKernels& kernels, ThreadPool& pool, PageAccess& access, const AttendCallArgs& args);
  // The pages the last call attended, per kv head (their data: where they were read).
  const std::vector<std::vector<PageView>>& views() const { return views_; }

 private:
  void plan_views(PageAccess& access, const SelectionPlan& plan, const std::vector<std::vector<PageView>>* all, std::size_t kv_heads);
  void compensate_dropped(const AttendCallArgs& args, const std::vector<std::vector<PageView>>& all);
  std::size_t sealed_bytes(const PageLayout* residual, std::size_t begin, std::size_t end) const;
  void page_masses(ThreadPool& pool, int group, std::vector<std::vector<float>>& masses);

  AttentionWorkspace workspace_;
  L0Stager l0_;
  std::vector<std::vector<PageView>> views_;      // the pages one call reads
  std::vector<std::vector<PageView>> all_views_;  // every page, when the call built them
  std::vector<float> page_lse_, query_lse_, compensation_states_;
  std::vector<std::size_t> mass_offset_;  // [kv head]: its first entry in page_lse_
  DroppedPages dropped_;                  // compensation's gather, reused across heads and calls
};

}  // namespace kv
