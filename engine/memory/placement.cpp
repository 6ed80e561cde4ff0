#include "memory/placement.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

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
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (candidates[a].predicted != candidates[b].predicted) return candidates[b].predicted;
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

std::vector<int> plan_prefetch(const std::vector<SelectionRecord>& history, int lookahead) {
  if (history.empty() || lookahead <= 0) return {};
  const SelectionRecord& now = history.back();
  const std::set<int> kept(now.kept.begin(), now.kept.end());
  std::vector<int> plan;
  std::set<int> planned;
  // Pages of the recent selections that this step dropped, newest first.
  for (auto it = history.rbegin() + 1; it != history.rend(); ++it) {
    for (int page : it->kept) {
      if (kept.count(page) == 0 && planned.insert(page).second) plan.push_back(page);
    }
  }
  // Churn: pages newly selected per step over the history.
  double churn = 0.0;
  for (std::size_t i = 1; i < history.size(); ++i) {
    const std::set<int> before(history[i - 1].kept.begin(), history[i - 1].kept.end());
    for (int page : history[i].kept) churn += before.count(page) == 0 ? 1.0 : 0.0;
  }
  if (history.size() > 1) churn /= static_cast<double>(history.size() - 1);
  const auto margin = static_cast<std::size_t>(std::max(1.0, std::ceil(churn)) * lookahead);
  std::vector<std::size_t> order(now.middle_pages.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return now.middle_scores[a] > now.middle_scores[b]; });
  std::size_t added = 0;
  for (std::size_t i : order) {
    if (added >= margin) break;
    const int page = now.middle_pages[i];
    if (kept.count(page) != 0) continue;
    ++added;
    if (planned.insert(page).second) plan.push_back(page);
  }
  return plan;
}

}  // namespace kv
