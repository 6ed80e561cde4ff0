#include "sparse/quest.h"

#include <algorithm>

namespace kv {

float quest_bound(const PageView& page, const float* q) { return page_bound_ref(page, q, 1); }

std::vector<std::vector<float>> quest_bounds(const std::vector<std::vector<PageView>>& pages, const float* q, int q_heads,
                                             const PageKernels& kernels, ThreadPool* pool) {
  const auto kv_heads = static_cast<int>(pages.size());
  const int group = q_heads / kv_heads;
  std::vector<std::vector<float>> bounds(pages.size());
  for (std::size_t h = 0; h < pages.size(); ++h) bounds[h].resize(pages[h].size());
  constexpr std::size_t kChunk = 64;  // pages per task
  std::vector<std::pair<std::size_t, std::size_t>> tasks;  // (head, first page)
  for (std::size_t h = 0; h < pages.size(); ++h) {
    for (std::size_t p = 0; p < pages[h].size(); p += kChunk) tasks.emplace_back(h, p);
  }
  auto run = [&](std::size_t task) {
    const auto [h, first] = tasks[task];
    const auto& list = pages[h];
    const std::size_t count = std::min(first + kChunk, list.size()) - first;
    kernels.page_bounds(list.data() + first, count, q + (h * static_cast<std::size_t>(group)) * list[first].layout->head_dim, group,
                        bounds[h].data() + first);
  };
  if (pool != nullptr) {
    pool->parallel_for(tasks.size(), run);
  } else {
    for (std::size_t t = 0; t < tasks.size(); ++t) run(t);
  }
  return bounds;
}

}  // namespace kv
