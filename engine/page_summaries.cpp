#include "page_summaries.h"

#include <algorithm>

#include "quant/fp16.h"

namespace kv {

void PageSummaries::append(const PageLayout& layout, const std::byte* page, const std::uint16_t* means, int head_dim) {
  const auto dim = static_cast<std::size_t>(head_dim);
  const auto* lo = layout.at<std::uint16_t>(page, layout.key_min);
  const auto* hi = layout.at<std::uint16_t>(page, layout.key_max);
  bounds_.insert(bounds_.end(), lo, lo + dim);
  bounds_.insert(bounds_.end(), hi, hi + dim);
  means_.insert(means_.end(), means, means + 2 * dim);
}

void PageSummaries::append_entry(const std::uint16_t* bounds, const std::uint16_t* means, int head_dim) {
  const auto dim = 2 * static_cast<std::size_t>(head_dim);
  bounds_.insert(bounds_.end(), bounds, bounds + dim);
  means_.insert(means_.end(), means, means + dim);
}

void PageSummaries::rewrite_bounds(std::size_t page, const PageLayout& layout, const std::byte* data, int head_dim) {
  const auto dim = static_cast<std::size_t>(head_dim);
  const auto* lo = layout.at<std::uint16_t>(data, layout.key_min);
  const auto* hi = layout.at<std::uint16_t>(data, layout.key_max);
  const auto first = bounds_.begin() + static_cast<std::ptrdiff_t>(page * 2 * dim);
  std::copy(lo, lo + dim, first);
  std::copy(hi, hi + dim, first + static_cast<std::ptrdiff_t>(dim));
}

void PageSummaries::truncate(std::size_t pages, int head_dim) {
  bounds_.resize(pages * 2 * static_cast<std::size_t>(head_dim));
  means_.resize(bounds_.size());
}

void PageSummaries::clear() {
  bounds_.clear();
  means_.clear();
}

void page_means(const float* k, const float* v, int tokens, int head_dim, std::uint16_t* means) {
  for (int c = 0; c < head_dim; ++c) {
    float k_sum = 0.0f, v_sum = 0.0f;
    for (int t = 0; t < tokens; ++t) {
      k_sum += k[t * head_dim + c];
      v_sum += v[t * head_dim + c];
    }
    means[c] = f32_to_f16(k_sum / static_cast<float>(tokens));
    means[head_dim + c] = f32_to_f16(v_sum / static_cast<float>(tokens));
  }
}

}  // namespace kv
