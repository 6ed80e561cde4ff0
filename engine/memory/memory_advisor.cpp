#include "memory/memory_advisor.h"

#include <algorithm>
#include <functional>

#include "memory/placement.h"

namespace kv {

std::vector<SelectionRecord> selection_records(const SelectionPlan* plan, std::size_t heads, int pages) {
  std::vector<SelectionRecord> records(heads);
  for (std::size_t h = 0; h < heads; ++h) {
    SelectionRecord& record = records[h];
    if (plan == nullptr) {
      for (int p = 0; p < pages; ++p) record.kept.push_back(p);
      continue;
    }
    const HeadSelection& selection = plan->heads[h];
    record.kept = selection.pages;
    std::vector<bool> forced(static_cast<std::size_t>(plan->total_pages), false);
    for (std::size_t i = 0; i < selection.pages.size(); ++i) {
      if (selection.reasons[i] != KeepReason::Score) forced[static_cast<std::size_t>(selection.pages[i])] = true;
    }
    for (int p = 0; p < plan->total_pages; ++p) {
      if (!forced[static_cast<std::size_t>(p)] && !plan->is_visual(p)) record.middle_pages.push_back(p);
    }
    record.middle_scores = selection.middle_scores;
  }
  return records;
}

std::vector<PageId> predicted_pages(const std::deque<std::vector<SelectionRecord>>& history, int lookahead,
                                    const std::vector<const std::vector<PageId>*>& sealed, std::size_t max_per_head) {
  std::vector<PageId> predicted;
  if (history.empty()) return predicted;
  const std::size_t heads = sealed.size();
  std::vector<std::vector<int>> per_head(heads);
  std::size_t longest = 0;
  for (std::size_t h = 0; h < heads; ++h) {
    std::vector<const SelectionRecord*> steps;
    for (const auto& step : history) steps.push_back(&step[h]);
    per_head[h] = plan_prefetch(steps, lookahead);
    const std::size_t kept = history.back()[h].kept.size();
    per_head[h].resize(std::min(per_head[h].size(), max_per_head > kept ? max_per_head - kept : 0));
    longest = std::max(longest, per_head[h].size());
  }
  const auto add = [&](std::size_t h, int page) {
    if (static_cast<std::size_t>(page) < sealed[h]->size()) predicted.push_back((*sealed[h])[static_cast<std::size_t>(page)]);
  };
  for (std::size_t h = 0; h < heads; ++h) {
    for (int page : history.back()[h].kept) add(h, page);
  }
  for (std::size_t rank = 0; rank < longest; ++rank) {
    for (std::size_t h = 0; h < heads; ++h) {
      if (rank < per_head[h].size()) add(h, per_head[h][rank]);
    }
  }
  return predicted;
}

void MemoryAdvisor::update_pins(int length, const std::vector<PageId>& sealed, std::vector<PagePin>& pins) const {
  if (config_.l1_bytes == 0) return;  // nothing is ever demoted
  const int window_start = length - config_.pin_window_tokens;
  for (std::size_t p = 0; p < sealed.size(); ++p) {
    const int first = static_cast<int>(p) * page_tokens_;
    // An image's page is never recent text: the window pins text pages only.
    const bool want = first < config_.pin_sink_tokens || (first + page_tokens_ > window_start && !pool_.read_only(sealed[p]));
    if (want == static_cast<bool>(pins[p])) continue;
    if (want) {
      pins[p] = PagePin(pool_, sealed[p]);
    } else {
      pins[p].reset();
    }
  }
}

void MemoryAdvisor::set_importance(const std::vector<PageId>& sealed, const std::vector<float>& given) const {
  for (std::size_t p = 0; p < sealed.size() && p < given.size(); ++p) pool_.set_importance(sealed[p], given[p]);
}

void MemoryAdvisor::add_mass(PageId page, float mass) const {
  pool_.set_importance(page, pool_.importance(page) * config_.importance_decay + mass);
}

std::vector<PageId> MemoryAdvisor::predict(std::deque<std::vector<SelectionRecord>>& history, const SelectionPlan* plan,
                                           int pages, const std::vector<const std::vector<PageId>*>& sealed) const {
  const int lookahead = config_.prefetch_lookahead;
  if (!predicts()) return {};
  // Selection history: what each kv head read this step, and the runners-up of the plan.
  history.push_back(selection_records(plan, sealed.size(), pages));
  while (history.size() > static_cast<std::size_t>(lookahead) + 1) history.pop_front();
  return predicted_pages(history, lookahead, sealed, room_share(sealed.size()));
}

std::vector<PageId> MemoryAdvisor::predict_next_layer(const std::vector<std::vector<int>>& taken_up,
                                                      const std::vector<const std::vector<PageId>*>& next_sealed) const {
  if (!predicts()) return {};
  return next_layer_pages(taken_up, next_sealed, room_share(next_sealed.size()));
}

std::size_t MemoryAdvisor::room_share(std::size_t heads) const {
  // Each (layer, kv head) may hold its share of the L1 room above what stays anyway (pinned
  // pages, the residual and the summary index): a prediction wider than that would only push
  // out another layer's pages before they are read.
  const std::size_t share = static_cast<std::size_t>(std::max(1, layers_)) * std::max<std::size_t>(1, heads);
  return pool_.room_pages() / share;
}

std::vector<PageId> next_layer_pages(const std::vector<std::vector<int>>& taken_up,
                                     const std::vector<const std::vector<PageId>*>& next_sealed, std::size_t max_per_head) {
  std::vector<PageId> pages;
  const std::size_t heads = std::min(taken_up.size(), next_sealed.size());
  std::size_t longest = 0;
  for (std::size_t h = 0; h < heads; ++h) longest = std::max(longest, std::min(taken_up[h].size(), max_per_head));
  for (std::size_t rank = 0; rank < longest; ++rank) {
    for (std::size_t h = 0; h < heads; ++h) {
      const std::vector<int>& taken = taken_up[h];
      if (rank >= taken.size()) continue;  // rank < longest <= max_per_head
      // The next layer has not appended this step's token yet: a page this layer just sealed
      // is not the next layer's sealed page.
      const auto p = static_cast<std::size_t>(taken[rank]);
      if (p < next_sealed[h]->size()) pages.push_back((*next_sealed[h])[p]);
    }
  }
  return pages;
}

void MemoryAdvisor::remember_ranking(std::vector<std::vector<std::uint8_t>>& ranked, const SelectionPlan& plan) {
  // Every decode step of every layer runs this: linear in the pages, no allocation once warm.
  ranked.resize(plan.heads.size());
  const auto total = static_cast<std::size_t>(plan.total_pages);
  thread_local std::vector<float> top;
  thread_local std::vector<int> middle;
  for (std::size_t h = 0; h < plan.heads.size(); ++h) {
    const HeadSelection& head = plan.heads[h];
    std::vector<std::uint8_t>& marks = ranked[h];
    if (marks.size() < total) marks.resize(total, 0);
    for (int page : head.pages) marks[static_cast<std::size_t>(page)] = 1;
    // The middle pages (neither forced nor an image's) in page order: the pages the scores are of.
    middle.clear();
    std::size_t next_kept = 0;
    for (std::size_t p = 0; p < total; ++p) {
      while (next_kept < head.pages.size() && static_cast<std::size_t>(head.pages[next_kept]) < p) ++next_kept;
      const bool forced = next_kept < head.pages.size() && static_cast<std::size_t>(head.pages[next_kept]) == p &&
                          head.reasons[next_kept] != KeepReason::Score;
      if (!forced && !plan.is_visual(static_cast<int>(p))) middle.push_back(static_cast<int>(p));
    }
    const std::vector<float>& score = head.middle_scores;
    if (middle.size() != score.size()) continue;  // a selector without scores
    const std::size_t budget = std::min(score.size(), static_cast<std::size_t>(std::max(0, plan.budget_pages)));
    if (budget == 0) continue;
    // The budget-th best score; ties at it go to the more recent pages, as selection's do.
    top.assign(score.begin(), score.end());
    std::nth_element(top.begin(), top.begin() + static_cast<std::ptrdiff_t>(budget - 1), top.end(), std::greater<float>());
    const float threshold = top[budget - 1];
    std::size_t above = 0;
    for (std::size_t i = 0; i < score.size(); ++i) {
      if (score[i] > threshold) {
        marks[static_cast<std::size_t>(middle[i])] = 1;
        ++above;
      }
    }
    for (std::size_t i = score.size(); i-- > 0 && above < budget;) {
      if (score[i] == threshold) {
        marks[static_cast<std::size_t>(middle[i])] = 1;
        ++above;
      }
    }
  }
}

std::uint64_t MemoryAdvisor::unpredictable_loads(std::vector<std::vector<std::uint8_t>>& ranked, const SelectionPlan* plan,
                                                 const std::vector<const std::vector<PageId>*>& sealed, std::vector<PageId> loaded) {
  if (plan == nullptr) return 0;
  std::sort(loaded.begin(), loaded.end());
  std::uint64_t unpredictable = 0;
  for (std::size_t h = 0; h < plan->heads.size() && h < sealed.size(); ++h) {
    const std::vector<PageId>& pages = *sealed[h];
    for (int page : plan->heads[h].pages) {
      const auto p = static_cast<std::size_t>(page);
      if (p >= pages.size() || !std::binary_search(loaded.begin(), loaded.end(), pages[p])) continue;
      if (h < ranked.size() && p < ranked[h].size() && ranked[h][p] != 0) continue;
      ++unpredictable;
    }
  }
  remember_ranking(ranked, *plan);
  return unpredictable;
}

SelectionChurn selection_churn(std::vector<std::vector<int>>& last_kept, const SelectionPlan& plan,
                               const std::vector<const std::vector<PageId>*>& sealed) {
  SelectionChurn churn;
  if (last_kept.size() < plan.heads.size()) last_kept.resize(plan.heads.size());
  churn.taken_up.resize(plan.heads.size());
  for (std::size_t h = 0; h < plan.heads.size() && h < sealed.size(); ++h) {
    const std::vector<int>& kept = plan.heads[h].pages;  // ascending
    // Residual pages (past the sealed ones) are the sequence's own and always read.
    const auto end = std::lower_bound(kept.begin(), kept.end(), static_cast<int>(sealed[h]->size()));
    std::vector<int>& last = last_kept[h];
    if (!last.empty()) {
      churn.compared = true;
      std::size_t i = 0;
      for (auto it = kept.begin(); it != end; ++it) {
        while (i < last.size() && last[i] < *it) ++i;
        if (i == last.size() || last[i] != *it) churn.taken_up[h].push_back(*it);
      }
    }
    churn.kept_pages += static_cast<std::uint64_t>(end - kept.begin());
    last.assign(kept.begin(), end);
  }
  return churn;
}

}  // namespace kv
