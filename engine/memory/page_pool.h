// Physical pages of one size, allocated from aligned slabs and reference counted (prefix
// sharing and copy-on-write forks hold the same page). A physical page knows its tier, its
// version and its reference count; its bytes never move while it is live.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "memory/tier.h"

namespace kv {

using PageId = std::uint32_t;
inline constexpr PageId kNoPage = 0xFFFFFFFFu;

struct PhysicalPage {
  std::byte* data = nullptr;
  Tier tier = Tier::L1;
  std::uint32_t refcount = 0;
  std::uint32_t version = 0;  // even: stable; odd: being rewritten
};

class PagePool {
 public:
  // page_bytes: a multiple of alignment; pages_per_slab: pages carved from one allocation.
  PagePool(std::size_t page_bytes, std::size_t alignment, std::size_t pages_per_slab);

  PageId allocate();  // refcount 1, tier L1
  void retain(PageId id);
  // Drops one reference; the page returns to the free list at zero.
  void release(PageId id);

  std::byte* data(PageId id) { return pages_[id].data; }
  const std::byte* data(PageId id) const { return pages_[id].data; }
  PhysicalPage& page(PageId id) { return pages_[id]; }
  const PhysicalPage& page(PageId id) const { return pages_[id]; }

  std::size_t page_bytes() const { return page_bytes_; }
  std::size_t live_pages() const { return live_; }
  std::size_t peak_live_pages() const { return peak_live_; }
  std::size_t reserved_bytes() const { return slabs_.size() * pages_per_slab_ * page_bytes_; }

 private:
  struct AlignedFree {
    void operator()(std::byte* p) const;
  };
  void grow();

  std::size_t page_bytes_;
  std::size_t alignment_;
  std::size_t pages_per_slab_;
  std::vector<std::unique_ptr<std::byte, AlignedFree>> slabs_;
  std::vector<PhysicalPage> pages_;
  std::vector<PageId> free_;
  std::size_t live_ = 0;
  std::size_t peak_live_ = 0;
};

}  // namespace kv
