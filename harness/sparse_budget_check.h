// Whether a case's sparse budget can select anything: at the largest context its decode steps
// attend over, a budgeted selector (quest, h2o, recency, hybrid) whose budget is at or below
// the pinned pages (sinks and window) keeps no middle page, so it silently becomes the window
// selector. Such a case is refused before the run starts, unless the policy says
// `allow_pinned_only`, in which case it runs and is marked degraded with the same words.
#pragma once

#include <string>

#include "sparse/policy.h"

namespace kvbench {

// Empty when the budget keeps at least one middle page at `context_tokens` (or there is no
// middle page to keep); otherwise the pages each part takes, in words: "budget 0.1 = 4 pages of
// the 36 pages at the largest decode context (2304 tokens) is at or below the 6 pinned pages: 1
// sink page (4 sinks) and 5 window pages (a 256-token window, pages of 64 tokens); no middle
// page would be selected".
std::string pinned_only_reason(const kv::SparsePolicy& policy, int page_tokens, int context_tokens);

// Empty unless the sinks and window pin every page at `context_tokens` under a selector other
// than full: nothing is left to select, so the "sparse" case is full attention in all but name;
// otherwise the pages in words.
std::string whole_context_pinned_reason(const kv::SparsePolicy& policy, int page_tokens, int context_tokens);

// The JSON field the budget was given in ("budget" or "budget_pages").
const char* budget_field(const kv::SparsePolicy& policy);

}  // namespace kvbench
