#include "memory/frame_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

namespace kv {

namespace {

constexpr std::size_t kSlabBytes = 2u << 20;

}  // namespace

void FrameArena::SlabFree::operator()(std::byte* p) const { std::free(p); }

FrameArena::FrameArena(std::size_t page_bytes, std::size_t alignment) : page_bytes_(page_bytes), alignment_(alignment) {}

std::byte* FrameArena::take(bool small) {
  auto& free = free_[small ? 1 : 0];
  const std::size_t bytes = class_bytes(small);
  if (free.empty()) {
    const std::size_t count = std::max<std::size_t>(1, kSlabBytes / bytes);
    const std::size_t slab = (count * bytes + kSlabBytes - 1) / kSlabBytes * kSlabBytes;
    void* memory = std::aligned_alloc(std::max(alignment_, kSlabBytes), slab);
    if (memory == nullptr) throw std::bad_alloc();
    madvise(memory, slab, MADV_HUGEPAGE);  // advice: where the OS refuses, 4 KiB pages serve
    auto* base = static_cast<std::byte*>(memory);
    slabs_.emplace_back(base);
    reserved_bytes_ += count * bytes;
    for (std::size_t i = count; i-- > 0;) free.push_back(base + i * bytes);
  }
  std::byte* frame = free.back();
  free.pop_back();
  used_bytes_ += bytes;
  return frame;
}

void FrameArena::give(std::byte* frame, bool small) {
  free_[small ? 1 : 0].push_back(frame);
  used_bytes_ -= class_bytes(small);
}

}  // namespace kv
