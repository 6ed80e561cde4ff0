// The L1 arena: page frames of three size classes (full-size text pages, long-tail pages and
// image pages, each class one size), carved from slabs as they are needed and recycled, so the
// arena never grows beyond its peak. Slabs are one transparent huge page each (2 MiB, aligned,
// madvise'd): decode walks every page of a long context, and with 4 KiB pages each 10 KB KV page
// costs TLB misses. Not thread-safe: the pool's owner thread takes and gives frames.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace kv {

// A sealed page's frame class: its layout, and so its size.
enum class FrameClass : std::uint8_t {
  Page,      // the policy's K/V formats
  LongTail,  // requantized to INT2 in danger
  Visual,    // an image's page in the visual block's formats
};
inline constexpr std::size_t kFrameClasses = 3;

class FrameArena {
 public:
  // page_bytes: the full-size class (also the others' until set); frames are aligned to
  // `alignment` (and every class a multiple of it).
  FrameArena(std::size_t page_bytes, std::size_t alignment);

  void set_class_bytes(FrameClass cls, std::size_t bytes);
  std::size_t class_bytes(FrameClass cls) const { return bytes_[static_cast<std::size_t>(cls)]; }

  std::byte* take(FrameClass cls);
  void give(std::byte* frame, FrameClass cls);

  std::size_t used_bytes() const { return used_bytes_; }          // frames handed out
  std::size_t reserved_bytes() const { return reserved_bytes_; }  // frames carved so far

 private:
  struct SlabFree {
    void operator()(std::byte* p) const;
  };
  std::size_t alignment_;
  std::array<std::size_t, kFrameClasses> bytes_;
  std::vector<std::unique_ptr<std::byte, SlabFree>> slabs_;
  std::array<std::vector<std::byte*>, kFrameClasses> free_;
  std::size_t used_bytes_ = 0;
  std::size_t reserved_bytes_ = 0;
};

}  // namespace kv
