#include "sparse_budget_check.h"

#include <fmt/format.h>

#include "sparse/selection.h"

namespace kvbench {

namespace {

std::string plural(int n, const char* word) { return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s"); }

}  // namespace

std::string pinned_only_reason(const kv::SparsePolicy& policy, int page_tokens, int context_tokens) {
  const kv::PinnedPages pinned = kv::pinned_pages(policy, context_tokens, page_tokens);
  if (!kv::budget_keeps_no_middle_page(policy, pinned)) return "";
  const int budget = kv::budget_in_pages(policy, pinned.pages);
  const std::string given = policy.budget_pages > 0 ? fmt::format("budget_pages {}", policy.budget_pages)
                                                    : fmt::format("budget {:g} = {}", static_cast<double>(policy.budget), plural(budget, "page"));
  const int overlap = pinned.sink_pages + pinned.window_pages() - pinned.count();
  return fmt::format("{} of the {} pages at the largest decode context ({} tokens) is at or below the {} pinned pages: {} ({}) and "
                     "{} (a {}-token window, pages of {} tokens){}; no middle page would be selected",
                     given, pinned.pages, context_tokens, pinned.count(), plural(pinned.sink_pages, "sink page"),
                     plural(policy.sinks, "sink"), plural(pinned.window_pages(), "window page"), policy.window, page_tokens,
                     overlap > 0 ? fmt::format(", {} of them both", overlap) : std::string());
}

std::string whole_context_pinned_reason(const kv::SparsePolicy& policy, int page_tokens, int context_tokens) {
  if (policy.selector == kv::Selector::Full) return "";
  const kv::PinnedPages pinned = kv::pinned_pages(policy, context_tokens, page_tokens);
  if (pinned.pages == 0 || pinned.middle() > 0) return "";
  return fmt::format("the {} ({}) and {} (a {}-token window, pages of {} tokens) cover all {} pages at the largest decode context "
                     "({} tokens): selector {} would select nothing and drop no token, the case would run as full attention",
                     plural(pinned.sink_pages, "sink page"), plural(policy.sinks, "sink"), plural(pinned.window_pages(), "window page"),
                     policy.window, page_tokens, pinned.pages, context_tokens, kv::selector_name(policy.selector));
}

const char* budget_field(const kv::SparsePolicy& policy) { return policy.budget_pages > 0 ? "budget_pages" : "budget"; }

}  // namespace kvbench
