#include "memory/placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kv {

double retention(const DemotionCandidate& page, std::uint64_t now) {
  const std::uint64_t age = now > page.last_used ? now - page.last_used : 0;
  return static_cast<double>(page.importance) + 1.0 / (1.0 + static_cast<double>(age));
}

std::vector<PageId> plan_demotion(std::vector<DemotionCandidate> candidates, std::uint64_t now,
                                  std::size_t bytes_to_free, std::size_t max_pages) {
  std::vector<double> keep(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) keep[i] = retention(candidates[i], now);
  std::vector<std::size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  // Unpredicted pages, then predicted ones, then predicted image pages: an image is read by
  // every question about it, so its predicted pages go only when nothing else can.
  const auto rank = [&](std::size_t i) { return (candidates[i].predicted ? 1 : 0) + (candidates[i].predicted && candidates[i].image ? 1 : 0); };
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    if (keep[a] != keep[b]) return keep[a] < keep[b];
    if (candidates[a].clean != candidates[b].clean) return candidates[a].clean;
    if (candidates[a].last_used != candidates[b].last_used) return candidates[a].last_used < candidates[b].last_used;
    return candidates[a].id < candidates[b].id;
  });
  std::vector<PageId> plan;
  std::size_t freed = 0;
  for (std::size_t i : order) {
    if (freed >= bytes_to_free || plan.size() >= max_pages) break;
    plan.push_back(candidates[i].id);
    freed += candidates[i].bytes;
  }
  return plan;
}

std::vector<int> plan_prefetch(const std::vector<const SelectionRecord*>& history, int lookahead, double widen) {
  if (history.empty() || lookahead <= 0) return {};
  const SelectionRecord& now = *history.back();
  int pages = 0;
  for (const SelectionRecord* record : history) {
    for (int page : record->kept) pages = std::max(pages, page + 1);
  }
  for (int page : now.middle_pages) pages = std::max(pages, page + 1);
  // Bitmaps over the pages: kept now, and already planned.
  std::vector<char> kept(static_cast<std::size_t>(pages), 0), planned(static_cast<std::size_t>(pages), 0);
  for (int page : now.kept) kept[static_cast<std::size_t>(page)] = 1;
  std::vector<int> plan;
  // Pages of the recent selections that this step dropped, newest first.
  for (auto it = history.rbegin() + 1; it != history.rend(); ++it) {
    for (int page : (*it)->kept) {
      const auto p = static_cast<std::size_t>(page);
      if (kept[p] || planned[p]) continue;
      planned[p] = 1;
      plan.push_back(page);
    }
  }
  // Churn: pages newly selected per step over the history.
  double churn = 0.0;
  std::vector<char> before(static_cast<std::size_t>(pages), 0);
  for (std::size_t i = 1; i < history.size(); ++i) {
    std::fill(before.begin(), before.end(), 0);
    for (int page : history[i - 1]->kept) before[static_cast<std::size_t>(page)] = 1;
    for (int page : history[i]->kept) churn += before[static_cast<std::size_t>(page)] ? 0.0 : 1.0;
  }
  if (history.size() > 1) churn /= static_cast<double>(history.size() - 1);
  const auto margin = static_cast<std::size_t>(std::max(1.0, std::ceil(churn * widen)) * lookahead);
  // The best-scored middle pages outside the selection (partial sort: only the top few matter).
  std::vector<std::size_t> order;
  order.reserve(now.middle_pages.size());
  for (std::size_t i = 0; i < now.middle_pages.size(); ++i) {
    if (!kept[static_cast<std::size_t>(now.middle_pages[i])]) order.push_back(i);
  }
  const std::size_t take = std::min(margin, order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(take), order.end(), [&](std::size_t a, std::size_t b) {
    return now.middle_scores[a] != now.middle_scores[b] ? now.middle_scores[a] > now.middle_scores[b] : a < b;
  });
  for (std::size_t i = 0; i < take; ++i) {
    const int page = now.middle_pages[order[i]];
    if (planned[static_cast<std::size_t>(page)]) continue;
    planned[static_cast<std::size_t>(page)] = 1;
    plan.push_back(page);
  }
  return plan;
}

NextLayerAgreement::Step NextLayerAgreement::record(const std::vector<std::vector<int>>& taken_up, const SelectionPlan& plan) {
  Step now;
  for (std::size_t h = 0; h < taken_up.size() && h < plan.heads.size(); ++h) {
    const std::vector<int>& kept = plan.heads[h].pages;  // ascending
    now.offered += taken_up[h].size();
    for (int page : taken_up[h]) now.read += std::binary_search(kept.begin(), kept.end(), page) ? 1 : 0;
  }
  if (now.offered == 0) return now;  // nothing to learn from: a steady selection says nothing
  offered = offered * kAgreementDecay + static_cast<double>(now.offered);
  read = read * kAgreementDecay + static_cast<double>(now.read);
  return now;
}

}  // namespace kv
