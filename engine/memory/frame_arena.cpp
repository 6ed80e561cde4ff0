#include "memory/frame_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <new>

#include "runtime/error.h"

namespace kv {

namespace {

constexpr std::size_t kSlabBytes = 2u << 20;

}  // namespace

void FrameArena::SlabFree::operator()(std::byte* p) const { std::free(p); }

FrameArena::FrameArena(std::size_t page_bytes, std::size_t alignment) : alignment_(alignment) { bytes_.fill(page_bytes); }

void FrameArena::set_class_bytes(FrameClass cls, std::size_t bytes) {
  KV_ASSERT(bytes > 0 && bytes % alignment_ == 0, "a frame class must be a multiple of the alignment");
  KV_ASSERT(free_[static_cast<std::size_t>(cls)].empty(), "a frame class is sized before its first frame");
  bytes_[static_cast<std::size_t>(cls)] = bytes;
}

std::byte* FrameArena::take(FrameClass cls) {
  auto& free = free_[static_cast<std::size_t>(cls)];
  const std::size_t bytes = class_bytes(cls);
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

void FrameArena::give(std::byte* frame, FrameClass cls) {
  free_[static_cast<std::size_t>(cls)].push_back(frame);
  used_bytes_ -= class_bytes(cls);
}

}  // namespace kv
