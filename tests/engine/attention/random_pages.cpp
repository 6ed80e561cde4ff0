#include "engine/attention/random_pages.h"

#include <algorithm>

#include "quant/quantizer.h"
#include "test_support.h"

namespace kvtest {

RandomPages random_pages(kv::Format format, int kv_heads, int dim, int page_tokens, int ctx, std::uint32_t seed) {
  RandomPages p;
  p.layout = kv::PageLayout::make({page_tokens, dim, format, format, 32, false});
  for (int h = 0; h < kv_heads; ++h) {
    for (int start = 0; start < ctx; start += page_tokens) {
      const int tokens = std::min(page_tokens, ctx - start);
      const auto k = random_keys(tokens, 1, dim, seed++);
      const auto v = random_values(static_cast<std::size_t>(tokens) * dim, seed++);
      p.storage.emplace_back(p.layout.bytes);
      kv::quantize_page(p.layout, k.data(), v.data(), tokens, p.storage.back().data(), nullptr);
    }
  }
  // Views once the storage no longer moves.
  std::size_t i = 0;
  p.views.resize(static_cast<std::size_t>(kv_heads));
  for (int h = 0; h < kv_heads; ++h) {
    for (int start = 0; start < ctx; start += page_tokens) {
      p.views[static_cast<std::size_t>(h)].push_back({&p.layout, p.storage[i++].data(), std::min(page_tokens, ctx - start)});
    }
  }
  return p;
}

}  // namespace kvtest
