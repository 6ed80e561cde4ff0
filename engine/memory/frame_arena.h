// The L1 arena: page frames of two size classes (full-size pages and long-tail pages), carved
// from slabs as they are needed and recycled, so the arena never grows beyond its peak. Slabs
// are one transparent huge page each (2 MiB, aligned, madvise'd): decode walks every page of a
// long context, and with 4 KiB pages each 10 KB KV page costs TLB misses. Not thread-safe: the
// pool's owner thread takes and gives frames.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace kv {

class FrameArena {
 public:
  // page_bytes: the full-size class; frames are aligned to `alignment` (and page_bytes a
  // multiple of it).
  FrameArena(std::size_t page_bytes, std::size_t alignment);

  // The long-tail class (0: none).
  void set_small_bytes(std::size_t bytes) { small_bytes_ = bytes; }
  std::size_t small_bytes() const { return small_bytes_; }
  std::size_t class_bytes(bool small) const { return small ? small_bytes_ : page_bytes_; }

  std::byte* take(bool small);
  void give(std::byte* frame, bool small);

  std::size_t used_bytes() const { return used_bytes_; }          // frames handed out
  std::size_t reserved_bytes() const { return reserved_bytes_; }  // frames carved so far

 private:
  struct SlabFree {
    void operator()(std::byte* p) const;
  };
  std::size_t page_bytes_, alignment_;
  std::size_t small_bytes_ = 0;
  std::vector<std::unique_ptr<std::byte, SlabFree>> slabs_;
  std::vector<std::byte*> free_[2];  // full-size, long-tail
  std::size_t used_bytes_ = 0;
  std::size_t reserved_bytes_ = 0;
};

}  // namespace kv
