#include "sparse/policy.h"

#include <cmath>
#include <string>

#include "runtime/error.h"

namespace kv {

std::string_view selector_name(Selector selector) {
  switch (selector) {
    case Selector::Full: return "full";
    case Selector::Window: return "window";
    case Selector::Quest: return "quest";
    case Selector::H2O: return "h2o";
    case Selector::Recency: return "recency";
    case Selector::Hybrid: return "hybrid";
  }
  return "unknown";
}

Selector parse_selector(std::string_view token, std::string_view where) {
  for (Selector s : {Selector::Full, Selector::Window, Selector::Quest, Selector::H2O, Selector::Recency, Selector::Hybrid}) {
    if (token == selector_name(s)) return s;
  }
  throw InputError(std::string(where), "selector",
                   "unknown selector '" + std::string(token) + "' (expected full, window, quest, h2o, recency or hybrid)");
}

void validate_sparse_policy(const SparsePolicy& p, std::string_view where_view) {
  const std::string where(where_view);
  auto fail = [&](const char* field, const std::string& reason) { throw InputError(where, field, reason); };
  if (p.sinks < 0) fail("sinks", "must be >= 0");
  if (p.window < 1) fail("window", "must be >= 1");
  const bool has_fraction = p.budget != 0.0f, has_pages = p.budget_pages != 0;
  if (p.needs_budget()) {
    if (has_fraction == has_pages) fail("budget", "give exactly one of budget and budget_pages");
    if (has_fraction && !(p.budget > 0.0f && p.budget <= 1.0f)) fail("budget", "must be in (0, 1]");
    if (has_pages && p.budget_pages < 1) fail("budget_pages", "must be >= 1");
  } else if (has_fraction || has_pages) {
    fail("budget", std::string("selector ") + std::string(selector_name(p.selector)) + " takes no budget");
  } else if (p.allow_pinned_only) {
    fail("allow_pinned_only", std::string("selector ") + std::string(selector_name(p.selector)) + " takes no budget");
  }
  for (auto [field, value] : {std::pair{"alpha", p.alpha}, std::pair{"beta", p.beta}, std::pair{"gamma", p.gamma}}) {
    if (!(value >= 0.0f) || !std::isfinite(value)) fail(field, "must be finite and >= 0");
  }
  if (!(p.decay > 0.0f && p.decay <= 1.0f)) fail("decay", "must be in (0, 1]");
  if (p.sample_every < 1) fail("sample_every", "must be >= 1");
  if (p.top_m < 1) fail("top_m", "must be >= 1");
  if (p.visual.enabled()) {
    if (p.selector == Selector::Full) fail("visual.budget", "selector full keeps every page: a visual budget needs a sparse selector");
    validate_visual_budget(p.visual, where);
  }
}

}  // namespace kv
