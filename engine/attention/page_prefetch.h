// Requests the bytes decode reads of a page (payload and scales, not the Quest bounds after
// them) a few cache lines per step of the current page's work: pages sit apart in memory, so
// the hardware prefetcher cannot see the next one coming, and a burst of requests at a page's
// start stalls on the miss queue.
#pragma once

#include <cstddef>

#include "quant/page_layout.h"

namespace kv {

class PagePrefetch {
 public:
  // page may be null or hold no data (nothing to request); steps: how many step() calls the
  // requests are spread over.
  PagePrefetch(const PageView* page, std::size_t steps) {
    if (page == nullptr || page->data == nullptr || steps == 0) return;
    at_ = reinterpret_cast<const char*>(page->data) + page->layout->k_data;
    end_ = reinterpret_cast<const char*>(page->data) + page->layout->key_min;
    per_step_ = (static_cast<std::size_t>(end_ - at_) / kLine + steps) / steps;
  }
  void step() {
    for (std::size_t i = 0; i < per_step_ && at_ < end_; ++i, at_ += kLine) __builtin_prefetch(at_);
  }

 private:
  static constexpr std::size_t kLine = 64;
  const char* at_ = nullptr;
  const char* end_ = nullptr;
  std::size_t per_step_ = 0;
};

}  // namespace kv
