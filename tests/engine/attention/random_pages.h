// Random quantized pages for the attention tests: kv_heads lists of pages of one format holding
// ctx tokens each (the last page partial when ctx % page_tokens != 0), with the views kernels read.
#pragma once

#include <cstdint>
#include <vector>

#include "quant/page_layout.h"

namespace kvtest {

struct RandomPages {
  kv::PageLayout layout;
  std::vector<std::vector<std::byte>> storage;
  std::vector<std::vector<kv::PageView>> views;  // [kv head][logical page]
};

RandomPages random_pages(kv::Format format, int kv_heads, int dim, int page_tokens, int ctx, std::uint32_t seed);

}  // namespace kvtest
