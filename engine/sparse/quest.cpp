#include "sparse/quest.h"

#include <algorithm>
#include <cmath>

#include "quant/fp16.h"

namespace kv {

float quest_bound(const PageView& page, const float* q) {
  const PageLayout& layout = *page.layout;
  const auto* lo = layout.at<std::uint16_t>(page.data, layout.key_min);
  const auto* hi = layout.at<std::uint16_t>(page.data, layout.key_max);
  float bound = 0.0f;
  for (int c = 0; c < layout.head_dim; ++c) {
    bound += std::max(q[c] * f16_to_f32(lo[c]), q[c] * f16_to_f32(hi[c]));
  }
  return bound;
}

std::vector<std::vector<float>> quest_bounds(const std::vector<std::vector<PageView>>& pages, const float* q, int q_heads,
                                             const PageKernels& kernels) {
  const auto kv_heads = static_cast<int>(pages.size());
  const int group = q_heads / kv_heads;
  std::vector<std::vector<float>> bounds(pages.size());
  for (int h = 0; h < kv_heads; ++h) {
    const auto& list = pages[static_cast<std::size_t>(h)];
    auto& out = bounds[static_cast<std::size_t>(h)];
    out.resize(list.size());
    for (std::size_t p = 0; p < list.size(); ++p) {
      out[p] = kernels.page_bound(list[p], q + static_cast<std::size_t>(h * group) * list[p].layout->head_dim, group);
    }
  }
  return bounds;
}

}  // namespace kv
