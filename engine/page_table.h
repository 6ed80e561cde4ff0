// The page table: per sequence, layer and kv head, the physical pages that hold its tokens in
// logical order - sealed pages (immutable, shared, reference counted in the TieredPool) and then
// the sequence's own full-precision residual pages (a PagePool) - with the sealed pages' summary
// index and the pins that keep some of them in L1.
//
// fork() shares the sealed pages (copy-on-write in the only form needed, since nothing writes
// into a sealed page) and copies the small residual. A reverse index answers which (sequence,
// layer, head, position) hold a physical page: the pool's per-page remedies (requantization)
// reach every owner's summaries through it instead of scanning every sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

#include "geometry.h"
#include "memory/page_pin.h"
#include "memory/page_pool.h"
#include "memory/placement.h"
#include "memory/tiered_pool.h"
#include "page_summaries.h"
#include "quant/page_layout.h"
#include "selection_plan.h"

namespace kv {

using SeqId = std::uint32_t;

struct HeadPages {
  std::vector<PageId> sealed;    // changed only through PageTable (the reverse index follows it)
  std::vector<PageId> residual;  // the sequence's own pages, not shared
  PageSummaries summaries;       // of the sealed pages, changed only through PageTable
  std::vector<PagePin> pins;     // per sealed page: held (a sink or window page) or empty
};

struct LayerPages {
  // Move only: pins are handles (and a copy would share them by mistake).
  LayerPages() = default;
  LayerPages(LayerPages&&) = default;
  LayerPages& operator=(LayerPages&&) = default;
  LayerPages(const LayerPages&) = delete;
  LayerPages& operator=(const LayerPages&) = delete;

  int length = 0;
  int sealed_tokens = 0;
  std::vector<HeadPages> heads;
  // The last selections (oldest first) per kv head, for prefetch prediction.
  std::deque<std::vector<SelectionRecord>> history;
  // Per kv head and logical page: some earlier query kept the page or ranked it within its
  // step's budget (MemoryAdvisor: a load of such a page was predictable).
  std::vector<std::vector<std::uint8_t>> ranked;
  // Per kv head: the sealed pages the last decode step kept (selection churn, MemoryAdvisor).
  std::vector<std::vector<int>> last_kept;
  // Per kv head: the pages the last decode step took up (kept, not kept the step before), which
  // the next layer is predicted to read when its `from_previous_layer` says so.
  std::vector<std::vector<int>> taken_up;
  // How well the previous layer's take-up foretold this layer's reads.
  NextLayerAgreement from_previous_layer;
  // The images added (KVCache::add_image), in order: each image's whole pages, read-only once sealed.
  std::vector<ImagePages> images;
};

struct PageOwner {
  SeqId seq = 0;
  int layer = 0;
  int head = 0;
  std::size_t position = 0;  // in the head's sealed pages
};

class PageTable {
 public:
  // residual_bytes: the size of a residual page (fork copies them).
  PageTable(const ModelGeometry& geometry, TieredPool& sealed, PagePool& residual, std::size_t residual_bytes);
  PageTable(const PageTable&) = delete;
  PageTable& operator=(const PageTable&) = delete;

  SeqId create();
  // A sequence that shares `parent`'s sealed pages and summaries and owns copies of its residual
  // pages; its pages hold no pins yet (its owner pins what it wants).
  SeqId fork(SeqId parent, const char* api);
  // Every page of the sequence returned and its pins dropped.
  void release(SeqId seq, const char* api);

  // Throw InputError(api, "seq" / "layer", reason) for an unknown sequence or layer.
  std::vector<LayerPages>& layers(SeqId seq, const char* api);
  const std::vector<LayerPages>& layers(SeqId seq, const char* api) const;
  LayerPages& layer(SeqId seq, int layer, const char* api);
  const LayerPages& layer(SeqId seq, int layer, const char* api) const;
  void check_layer(int layer, const char* api) const;

  // A newly sealed page joins the end of (seq, layer, head)'s sealed pages with its summary
  // (bounds from the page, `means` from page_means()).
  void push_sealed(SeqId seq, int layer, int head, PageId id, const PageLayout& layout, const std::uint16_t* means);
  // A sealed page another sequence sealed (a cached prefix page) joins the end of (seq, layer,
  // head)'s sealed pages with a reference of its own and the summary it was sealed with.
  void share_sealed(SeqId seq, int layer, int head, PageId id, const std::uint16_t* bounds, const std::uint16_t* means);
  // Sealed pages from position `keep` on leave (seq, layer, head): unpinned, released.
  void truncate_sealed(SeqId seq, int layer, int head, std::size_t keep);
  // A page rewritten in place: every owner's summary takes the new page's key bounds.
  void rewrite_bounds(PageId id, const PageLayout& layout, const std::byte* data);

  // Every (sequence, layer, head, position) that holds `id` as a sealed page.
  const std::vector<PageOwner>& owners(PageId id) const;
  // L1 bytes of every sequence's summary index.
  std::size_t summary_bytes() const { return summary_bytes_; }
  std::size_t sequences() const { return sequences_.size(); }

 private:
  void copy_into(SeqId child, SeqId parent);  // fork's pages and summaries
  void add_owner(PageId id, const PageOwner& owner);
  void remove_owner(PageId id, const PageOwner& owner);

  ModelGeometry geometry_;
  TieredPool& sealed_;
  PagePool& residual_;
  std::size_t residual_bytes_;
  std::unordered_map<SeqId, std::vector<LayerPages>> sequences_;
  SeqId next_seq_ = 0;
  std::vector<std::vector<PageOwner>> owners_;  // by physical page id
  std::size_t summary_bytes_ = 0;
};

}  // namespace kv
