#include "resident_pages.h"

namespace kv {

std::size_t ResidentPages::pages() const { return layer_->heads[0].sealed.size() + layer_->heads[0].residual.size(); }

PageView ResidentPages::view(std::size_t head, std::size_t page) const { return view_of(*layer_, head, page); }

PageView ResidentPages::view_of(const LayerPages& layer, std::size_t head, std::size_t page) const {
  const HeadPages& pages = layer.heads[head];
  if (page < pages.sealed.size()) {
    const TieredPool::Residence where = sealed_.residence(pages.sealed[page]);
    return {layouts_.of(where.cls), where.frame, page_tokens_,
            pages.summaries.bounds(page, head_dim_), static_cast<int>(page) * page_tokens_,
            pages.summaries.means(page, head_dim_)};
  }
  const std::size_t open = page - pages.sealed.size();
  const std::byte* data = residual_.data(pages.residual[open]);
  return {layouts_.residual, data, PageLayout::header(data)->tokens, nullptr,
          layer.sealed_tokens + static_cast<int>(open) * page_tokens_};
}

void ResidentPages::all_views(const LayerPages& layer, std::vector<std::vector<PageView>>& views) const {
  views.resize(layer.heads.size());
  for (std::size_t h = 0; h < layer.heads.size(); ++h) {
    const std::size_t pages = layer.heads[h].sealed.size() + layer.heads[h].residual.size();
    views[h].clear();
    views[h].reserve(pages);
    for (std::size_t p = 0; p < pages; ++p) views[h].push_back(view_of(layer, h, p));
  }
}

void ResidentPages::acquire(std::vector<std::vector<PageView>>& views, std::size_t begin, std::size_t end) {
  ids_.clear();
  std::uint64_t bytes = 0;
  for (std::size_t h = 0; h < views.size(); ++h) {
    for (std::size_t p = begin; p < end && p < views[h].size(); ++p) {
      const PageView& view = views[h][p];
      bytes += view.layout->k_read_bytes(view.tokens) + view.layout->v_read_bytes(view.tokens);
      if (view.layout == layouts_.residual) continue;
      ids_.push_back(layer_->heads[h].sealed[static_cast<std::size_t>(view.first_token / page_tokens_)]);
    }
  }
  sealed_.acquire(ids_, frames_);
  std::size_t next = 0;
  for (auto& head : views) {
    for (std::size_t p = begin; p < end && p < head.size(); ++p) {
      if (head[p].layout != layouts_.residual) head[p].data = frames_[next++];
    }
  }
  sealed_.stage_l0(bytes);
  read_bytes_ += bytes;
}

void ResidentPages::release() { sealed_.release_acquired(); }

}  // namespace kv
