// The summary index of one kv head's sealed pages: what selection and compensation read without
// touching the pages, f16, one entry per sealed page in logical order - the key bounds
// [key_min, key_max][head_dim] (Quest's input, stored in the page too) and the means
// [key_mean, value_mean][head_dim] (compensation's pseudo-token). The bounds of all pages are
// one contiguous array, so a selector reads them in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "quant/page_layout.h"

namespace kv {

class PageSummaries {
 public:
  // A newly sealed page: its bounds from the page, its means as computed by page_means().
  void append(const PageLayout& layout, const std::byte* page, const std::uint16_t* means, int head_dim);
  // A page another index summarised (a shared prefix page): bounds [2][head_dim], means [2][head_dim].
  void append_entry(const std::uint16_t* bounds, const std::uint16_t* means, int head_dim);
  // A page rewritten in place (requantized): its bounds again from the new page; the means stay,
  // since they summarise the values the page was sealed from.
  void rewrite_bounds(std::size_t page, const PageLayout& layout, const std::byte* data, int head_dim);
  // Keeps the first `pages` entries.
  void truncate(std::size_t pages, int head_dim);
  void clear();

  const std::uint16_t* bounds(std::size_t page, int head_dim) const { return bounds_.data() + page * 2 * static_cast<std::size_t>(head_dim); }
  const std::uint16_t* means(std::size_t page, int head_dim) const { return means_.data() + page * 2 * static_cast<std::size_t>(head_dim); }
  const std::uint16_t* all_bounds() const { return bounds_.data(); }
  // Bytes of one page's entry (both arrays).
  static std::size_t entry_bytes(int head_dim) { return 4 * static_cast<std::size_t>(head_dim) * sizeof(std::uint16_t); }

 private:
  std::vector<std::uint16_t> bounds_;
  std::vector<std::uint16_t> means_;
};

// The mean key and mean value of a page's `tokens` rows (k, v: [tokens][head_dim]), f16, into
// means [2][head_dim].
void page_means(const float* k, const float* v, int tokens, int head_dim, std::uint16_t* means);

}  // namespace kv
