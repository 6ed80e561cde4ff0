// Compensation for the pages a sparse plan drops (mean_v): every dropped page joins a q head's
// softmax as one pseudo-token whose key is the page's mean key, with logit
// scale * q . mean_k + ln(tokens) (the page's tokens share one weight), and whose value is the
// page's mean value. The result is one SoftmaxState per q head that paged_attention merges with
// the attended pages, so the dropped mass is estimated instead of lost.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/page_layout.h"

namespace kv {

// One kv head's dropped pages, summarised: means from a sealed page's summary (f16), or the
// average of a residual page's F32 rows.
struct DroppedPages {
  int dim = 0;
  std::vector<float> k_means, v_means;  // [page][dim]
  std::vector<float> log_tokens;        // ln(tokens) per page

  std::size_t count() const { return log_tokens.size(); }
};

// Gathers the pages of `pages` (one kv head, logical order) that `kept` (ascending logical
// pages) leaves out, skipping empty ones. Residual pages (means == nullptr) are read through
// `residual_layout` (F32 rows).
void gather_dropped_pages(const std::vector<PageView>& pages, const std::vector<int>& kept, const PageLayout& residual_layout,
                          int dim, DroppedPages& out);

// The group's q heads (q: [group][dim]) against one kv head's dropped pages: writes `group`
// SoftmaxStates of stride SoftmaxState::stride(dim) at `states` (empty states when nothing was
// dropped). Float arithmetic in a fixed order: the engine's results repeat bit for bit.
void compensation_states(const DroppedPages& dropped, const float* q, int group, float scale, float* states);

// Its reference twin: the same states computed in double from the definition (the
// pseudo-tokens' softmax weights normalised to the largest), for tests.
void compensation_states_ref(const DroppedPages& dropped, const float* q, int group, float scale, float* states);

}  // namespace kv
