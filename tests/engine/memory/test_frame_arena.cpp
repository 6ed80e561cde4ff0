// The L1 frame arena: aligned, distinct frames of three size classes, counted as they are handed
// out, recycled when given back, and carved from slabs only when none is free.
#include <catch2/catch.hpp>

#include <cstdint>
#include <set>
#include <vector>

#include "memory/frame_arena.h"

using namespace kv;

TEST_CASE("frames are aligned, distinct, counted and recycled per size class", "[memory][arena]") {
  constexpr std::size_t kPage = 3 * 4096, kSmall = 4096, kImage = 2 * 4096, kAlign = 4096;  // multiples of the alignment
  FrameArena arena(kPage, kAlign);
  CHECK(arena.class_bytes(FrameClass::Visual) == kPage);  // every class the page's until sized
  arena.set_class_bytes(FrameClass::LongTail, kSmall);
  arena.set_class_bytes(FrameClass::Visual, kImage);
  CHECK(arena.class_bytes(FrameClass::Page) == kPage);
  CHECK(arena.class_bytes(FrameClass::LongTail) == kSmall);
  CHECK(arena.class_bytes(FrameClass::Visual) == kImage);
  std::vector<std::byte*> frames;
  std::set<std::byte*> seen;
  for (int i = 0; i < 300; ++i) {  // more than one 2 MiB slab holds
    std::byte* f = arena.take(FrameClass::Page);
    CHECK(reinterpret_cast<std::uintptr_t>(f) % kAlign == 0);
    CHECK(seen.insert(f).second);
    frames.push_back(f);
  }
  CHECK(arena.used_bytes() == 300 * kPage);
  const std::size_t reserved = arena.reserved_bytes();
  CHECK(reserved >= 300 * kPage);
  std::byte* small = arena.take(FrameClass::LongTail);
  std::byte* image = arena.take(FrameClass::Visual);
  CHECK(seen.count(small) == 0);  // each its own class
  CHECK(seen.count(image) == 0);
  CHECK(small != image);
  CHECK(arena.used_bytes() == 300 * kPage + kSmall + kImage);
  // A frame given back is the next one taken, with no new slab.
  arena.give(frames.back(), FrameClass::Page);
  const std::size_t reserved_now = arena.reserved_bytes();
  CHECK(arena.take(FrameClass::Page) == frames.back());
  CHECK(arena.reserved_bytes() == reserved_now);
  for (std::byte* f : frames) arena.give(f, FrameClass::Page);
  arena.give(small, FrameClass::LongTail);
  arena.give(image, FrameClass::Visual);
  CHECK(arena.take(FrameClass::Visual) == image);  // back to its own class's list
  arena.give(image, FrameClass::Visual);
  CHECK(arena.used_bytes() == 0);
  CHECK(arena.reserved_bytes() == reserved_now);  // never shrinks below its peak
}
