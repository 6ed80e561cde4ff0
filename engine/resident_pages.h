// The pages of one (sequence, layer) as an attention call reaches them (attention/attend_call.h):
// views built from the page table - a sealed page's summaries always, its bytes when resident -
// and the sealed pages a call reads made resident and held in the TieredPool, their bytes
// accounted as staged through L0.
#pragma once

#include <cstdint>
#include <vector>

#include "attention/attend_call.h"
#include "cache_layouts.h"
#include "page_table.h"

namespace kv {

class ResidentPages final : public PageAccess {
 public:
  using Layouts = CacheLayouts;
  ResidentPages(Layouts layouts, int page_tokens, int head_dim, TieredPool& sealed, const PagePool& residual)
      : layouts_(layouts), page_tokens_(page_tokens), head_dim_(head_dim), sealed_(sealed), residual_(residual) {}

  // The layer the next calls read; it stays in place while they run.
  void bind(const LayerPages& layer) { layer_ = &layer; }
  // Bytes acquired (read) since the last reset: the call's L0 traffic.
  std::uint64_t read_bytes() const { return read_bytes_; }
  void reset_read_bytes() { read_bytes_ = 0; }

  std::size_t pages() const override;
  PageView view(std::size_t head, std::size_t page) const override;
  void acquire(std::vector<std::vector<PageView>>& views, std::size_t begin, std::size_t end) override;
  void release() override;

  // Every kv head's views of `layer`, into `views` (reusing its buffers).
  void all_views(const LayerPages& layer, std::vector<std::vector<PageView>>& views) const;

 private:
  PageView view_of(const LayerPages& layer, std::size_t head, std::size_t page) const;

  Layouts layouts_;
  int page_tokens_;
  int head_dim_;
  TieredPool& sealed_;
  const PagePool& residual_;
  const LayerPages* layer_ = nullptr;
  std::vector<PageId> ids_;  // the sealed pages of one acquire, head after head
  std::vector<const std::byte*> frames_;
  std::uint64_t read_bytes_ = 0;
};

}  // namespace kv
