// Sparse-attention policy: which pages of the context a decode step attends to.
#pragma once

#include <string_view>

#include "sparse/visual_budget.h"

namespace kv {

enum class Selector : unsigned char {
  Full,     // every page (no sparsity)
  Window,   // sinks + local window only (StreamingLLM-style)
  Quest,    // + middle pages by the query-aware upper bound of q.k (per-page key min/max)
  H2O,      // + middle pages by accumulated attention (heavy hitters), decayed per step
  Recency,  // + the most recent middle pages
  Hybrid,   // + middle pages by alpha*accumulated + beta*recency + gamma*query bound
};

enum class Compensation : unsigned char { None, MeanV };

struct SparsePolicy {
  Selector selector = Selector::Full;
  int sinks = 4;            // first tokens, always kept
  int window = 256;         // most recent tokens, always kept
  float budget = 0.0f;      // fraction of the context's pages, 0 < budget <= 1 ...
  int budget_pages = 0;     // ... or an absolute page count: exactly one of the two
  // A budget at or below the pinned pages (sinks + window) keeps no middle page: such a case is
  // refused unless this says it is meant, and then it runs marked degraded.
  bool allow_pinned_only = false;
  float alpha = 1.0f;       // hybrid: weight of accumulated attention
  float beta = 0.1f;        // hybrid: weight of recency
  float gamma = 1.0f;       // hybrid: weight of the query bound
  float decay = 0.9f;       // per-step decay of accumulated attention
  Compensation compensation = Compensation::None;
  bool sparse_prefill = false;
  int sample_every = 8;     // reference checks every k steps
  int top_m = 32;           // critical tokens per (layer, head) for critical_miss_rate
  VisualBudget visual;      // image pages selected per image (off unless given)

  bool needs_budget() const { return selector != Selector::Full && selector != Selector::Window; }
};

std::string_view selector_name(Selector selector);
Selector parse_selector(std::string_view token, std::string_view where);

// Throws InputError ("<where>: <field>: <reason>") for an impossible policy.
void validate_sparse_policy(const SparsePolicy& policy, std::string_view where);

}  // namespace kv
