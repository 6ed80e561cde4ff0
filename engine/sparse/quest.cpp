#include "sparse/quest.h"

#include <algorithm>

#include "runtime/error.h"

namespace kv {

float quest_bound(const PageView& page, const float* q) { return page_bound_ref(page, q, 1); }

std::vector<std::vector<float>> quest_bounds(const std::vector<HeadKeyBounds>& heads, int head_dim, const float* q,
                                             int q_heads, const PageKernels& kernels, ThreadPool* pool) {
  const auto kv_heads = static_cast<int>(heads.size());
  const int group = q_heads / kv_heads;
  const std::size_t stride = 2 * static_cast<std::size_t>(head_dim);
  std::vector<std::vector<float>> bounds(heads.size());
  for (std::size_t h = 0; h < heads.size(); ++h) bounds[h].resize(heads[h].pages(head_dim));
  constexpr std::size_t kChunk = 64;  // pages per task
  struct Task {
    std::size_t head, first, count;
    const std::uint16_t* run;  // the chunk's bounds
  };
  std::vector<Task> tasks;
  for (std::size_t h = 0; h < heads.size(); ++h) {
    const HeadKeyBounds& head = heads[h];
    for (std::size_t p = 0; p < head.sealed_pages; p += kChunk) {
      tasks.push_back({h, p, std::min(kChunk, head.sealed_pages - p), head.sealed + p * stride});
    }
    const std::size_t residual = head.residual.size() / stride;
    if (residual > 0) tasks.push_back({h, head.sealed_pages, residual, head.residual.data()});
  }
  auto run = [&](std::size_t i) {
    const Task& task = tasks[i];
    kernels.page_bounds(task.run, task.count, head_dim, q + task.head * static_cast<std::size_t>(group) * head_dim, group,
                        bounds[task.head].data() + task.first);
  };
  if (pool != nullptr) {
    pool->parallel_for(tasks.size(), run);
  } else {
    for (std::size_t t = 0; t < tasks.size(); ++t) run(t);
  }
  return bounds;
}

std::vector<std::vector<float>> quest_bounds(const std::vector<std::vector<PageView>>& pages, const float* q, int q_heads,
                                             const PageKernels& kernels, ThreadPool* pool) {
  KV_ASSERT(!pages.empty(), "quest_bounds needs at least one kv head");
  if (pages[0].empty()) return std::vector<std::vector<float>>(pages.size());
  const int dim = pages[0][0].layout->head_dim;
  std::vector<HeadKeyBounds> heads(pages.size());
  for (std::size_t h = 0; h < pages.size(); ++h) {
    for (const PageView& page : pages[h]) heads[h].add_residual(page.key_min(), page.key_max(), dim);
  }
  return quest_bounds(heads, dim, q, q_heads, kernels, pool);
}

}  // namespace kv
