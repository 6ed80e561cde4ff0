#include "memory/page_pool.h"

#include <cstdlib>
#include <new>

#include "runtime/error.h"

namespace kv {

void PagePool::AlignedFree::operator()(std::byte* p) const { std::free(p); }

PagePool::PagePool(std::size_t page_bytes, std::size_t alignment, std::size_t pages_per_slab)
    : page_bytes_(page_bytes), alignment_(alignment), pages_per_slab_(pages_per_slab) {
  KV_ASSERT(page_bytes > 0 && page_bytes % alignment == 0, "page size must be a multiple of the alignment");
  KV_ASSERT(pages_per_slab > 0, "a slab holds at least one page");
}

void PagePool::grow() {
  void* memory = std::aligned_alloc(alignment_, page_bytes_ * pages_per_slab_);
  if (memory == nullptr) throw std::bad_alloc();
  auto* base = static_cast<std::byte*>(memory);
  slabs_.emplace_back(base);
  // Push in reverse so pages are handed out in address order.
  for (std::size_t i = pages_per_slab_; i-- > 0;) {
    PhysicalPage page;
    page.data = base + i * page_bytes_;
    pages_.push_back(page);
    free_.push_back(static_cast<PageId>(pages_.size() - 1));
  }
}

PageId PagePool::allocate() {
  if (free_.empty()) grow();
  const PageId id = free_.back();
  free_.pop_back();
  PhysicalPage& page = pages_[id];
  page.refcount = 1;
  page.tier = Tier::L1;
  page.version += page.version & 1u;  // a reused page starts stable
  ++live_;
  if (live_ > peak_live_) peak_live_ = live_;
  return id;
}

void PagePool::retain(PageId id) {
  KV_ASSERT(pages_[id].refcount > 0, "retain of a free page");
  ++pages_[id].refcount;
}

void PagePool::release(PageId id) {
  KV_ASSERT(pages_[id].refcount > 0, "release of a free page");
  if (--pages_[id].refcount == 0) {
    free_.push_back(id);
    --live_;
  }
}

}  // namespace kv
