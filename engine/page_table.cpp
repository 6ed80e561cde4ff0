#include "page_table.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "runtime/error.h"

namespace kv {

PageTable::PageTable(const ModelGeometry& geometry, TieredPool& sealed, PagePool& residual, std::size_t residual_bytes)
    : geometry_(geometry), sealed_(sealed), residual_(residual), residual_bytes_(residual_bytes) {}

SeqId PageTable::create() {
  const SeqId id = next_seq_++;
  std::vector<LayerPages>& layers = sequences_[id];
  layers.resize(static_cast<std::size_t>(geometry_.layers));
  for (LayerPages& layer : layers) layer.heads.resize(static_cast<std::size_t>(geometry_.kv_heads));
  return id;
}

SeqId PageTable::fork(SeqId parent_id, const char* api) {
  layers(parent_id, api);  // an unknown parent fails before the child exists
  const SeqId child_id = create();
  try {
    copy_into(child_id, parent_id);
  } catch (...) {
    release(child_id, api);  // a failed copy (out of memory) leaves no half-built sequence
    throw;
  }
  return child_id;
}

void PageTable::copy_into(SeqId child_id, SeqId parent_id) {
  std::vector<LayerPages>& child = sequences_.at(child_id);
  const std::vector<LayerPages>& parent = sequences_.at(parent_id);  // after create(): no rehash since
  for (std::size_t l = 0; l < parent.size(); ++l) {
    const LayerPages& from = parent[l];
    LayerPages& to = child[l];
    to.length = from.length;
    to.sealed_tokens = from.sealed_tokens;
    to.images = from.images;
    for (std::size_t h = 0; h < from.heads.size(); ++h) {
      const HeadPages& src = from.heads[h];
      HeadPages& dst = to.heads[h];
      // Page by page, so that release() undoes exactly what a failure left.
      for (std::size_t p = 0; p < src.sealed.size(); ++p) {
        dst.pins.emplace_back();
        dst.sealed.push_back(src.sealed[p]);
        sealed_.retain(dst.sealed[p]);
        add_owner(dst.sealed[p], {child_id, static_cast<int>(l), static_cast<int>(h), p});
        summary_bytes_ += PageSummaries::entry_bytes(geometry_.head_dim);
      }
      dst.summaries = src.summaries;
      for (PageId id : src.residual) {
        const PageId copy = residual_.allocate();
        std::memcpy(residual_.data(copy), residual_.data(id), residual_bytes_);
        dst.residual.push_back(copy);
      }
    }
  }
}

void PageTable::release(SeqId seq, const char* api) {
  std::vector<LayerPages>& all = layers(seq, api);
  for (std::size_t l = 0; l < all.size(); ++l) {
    for (std::size_t h = 0; h < all[l].heads.size(); ++h) {
      HeadPages& head = all[l].heads[h];
      for (std::size_t p = 0; p < head.sealed.size(); ++p) {
        head.pins[p].reset();
        sealed_.release(head.sealed[p]);
        remove_owner(head.sealed[p], {seq, static_cast<int>(l), static_cast<int>(h), p});
      }
      summary_bytes_ -= head.sealed.size() * PageSummaries::entry_bytes(geometry_.head_dim);
      for (PageId id : head.residual) residual_.release(id);
    }
  }
  sequences_.erase(seq);
}

std::vector<LayerPages>& PageTable::layers(SeqId seq, const char* api) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) throw InputError(api, "seq", "unknown sequence " + std::to_string(seq));
  return it->second;
}

const std::vector<LayerPages>& PageTable::layers(SeqId seq, const char* api) const {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) throw InputError(api, "seq", "unknown sequence " + std::to_string(seq));
  return it->second;
}

void PageTable::check_layer(int layer, const char* api) const {
  if (layer < 0 || layer >= geometry_.layers) {
    throw InputError(api, "layer", std::to_string(layer) + " is outside 0.." + std::to_string(geometry_.layers - 1));
  }
}

LayerPages& PageTable::layer(SeqId seq, int layer, const char* api) {
  check_layer(layer, api);
  return layers(seq, api)[static_cast<std::size_t>(layer)];
}

const LayerPages& PageTable::layer(SeqId seq, int layer, const char* api) const {
  check_layer(layer, api);
  return layers(seq, api)[static_cast<std::size_t>(layer)];
}

void PageTable::push_sealed(SeqId seq, int layer, int head, PageId id, const PageLayout& layout, const std::uint16_t* means) {
  HeadPages& pages = sequences_.at(seq)[static_cast<std::size_t>(layer)].heads[static_cast<std::size_t>(head)];
  add_owner(id, {seq, layer, head, pages.sealed.size()});
  pages.sealed.push_back(id);
  pages.pins.emplace_back();
  pages.summaries.append(layout, sealed_.frame(id), means, geometry_.head_dim);
  summary_bytes_ += PageSummaries::entry_bytes(geometry_.head_dim);
}

void PageTable::share_sealed(SeqId seq, int layer, int head, PageId id, const std::uint16_t* bounds, const std::uint16_t* means) {
  HeadPages& pages = sequences_.at(seq)[static_cast<std::size_t>(layer)].heads[static_cast<std::size_t>(head)];
  sealed_.retain(id);
  add_owner(id, {seq, layer, head, pages.sealed.size()});
  pages.sealed.push_back(id);
  pages.pins.emplace_back();
  pages.summaries.append_entry(bounds, means, geometry_.head_dim);
  summary_bytes_ += PageSummaries::entry_bytes(geometry_.head_dim);
}

void PageTable::truncate_sealed(SeqId seq, int layer, int head, std::size_t keep) {
  HeadPages& pages = sequences_.at(seq)[static_cast<std::size_t>(layer)].heads[static_cast<std::size_t>(head)];
  while (pages.sealed.size() > keep) {
    pages.pins.pop_back();  // unpins before the page goes
    sealed_.release(pages.sealed.back());
    remove_owner(pages.sealed.back(), {seq, layer, head, pages.sealed.size() - 1});
    pages.sealed.pop_back();
    summary_bytes_ -= PageSummaries::entry_bytes(geometry_.head_dim);
  }
  pages.summaries.truncate(pages.sealed.size(), geometry_.head_dim);
}

void PageTable::rewrite_bounds(PageId id, const PageLayout& layout, const std::byte* data) {
  for (const PageOwner& owner : owners(id)) {
    HeadPages& pages = sequences_.at(owner.seq)[static_cast<std::size_t>(owner.layer)].heads[static_cast<std::size_t>(owner.head)];
    pages.summaries.rewrite_bounds(owner.position, layout, data, geometry_.head_dim);
  }
}

const std::vector<PageOwner>& PageTable::owners(PageId id) const {
  static const std::vector<PageOwner> none;
  return id < owners_.size() ? owners_[id] : none;
}

void PageTable::add_owner(PageId id, const PageOwner& owner) {
  if (id >= owners_.size()) owners_.resize(static_cast<std::size_t>(id) + 1);
  owners_[id].push_back(owner);
}

void PageTable::remove_owner(PageId id, const PageOwner& owner) {
  std::vector<PageOwner>& list = owners_[id];
  const auto it = std::find_if(list.begin(), list.end(), [&](const PageOwner& o) {
    return o.seq == owner.seq && o.layer == owner.layer && o.head == owner.head && o.position == owner.position;
  });
  KV_ASSERT(it != list.end(), "page table: reverse index lost an owner");
  list.erase(it);
}

}  // namespace kv
