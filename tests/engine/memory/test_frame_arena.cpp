// The L1 frame arena: aligned, distinct frames of two size classes, counted as they are handed
// out, recycled when given back, and carved from slabs only when none is free.
#include <catch2/catch.hpp>

#include <cstdint>
#include <set>
#include <vector>

#include "memory/frame_arena.h"

using namespace kv;

TEST_CASE("frames are aligned, distinct, counted and recycled per size class", "[memory][arena]") {
  constexpr std::size_t kPage = 3 * 4096, kSmall = 4096, kAlign = 4096;  // sizes are multiples of the alignment
  FrameArena arena(kPage, kAlign);
  arena.set_small_bytes(kSmall);
  CHECK(arena.class_bytes(false) == kPage);
  CHECK(arena.class_bytes(true) == kSmall);
  std::vector<std::byte*> frames;
  std::set<std::byte*> seen;
  for (int i = 0; i < 300; ++i) {  // more than one 2 MiB slab holds
    std::byte* f = arena.take(false);
    CHECK(reinterpret_cast<std::uintptr_t>(f) % kAlign == 0);
    CHECK(seen.insert(f).second);
    frames.push_back(f);
  }
  CHECK(arena.used_bytes() == 300 * kPage);
  const std::size_t reserved = arena.reserved_bytes();
  CHECK(reserved >= 300 * kPage);
  std::byte* small = arena.take(true);
  CHECK(seen.count(small) == 0);  // its own class
  CHECK(arena.used_bytes() == 300 * kPage + kSmall);
  // A frame given back is the next one taken, with no new slab.
  arena.give(frames.back(), false);
  const std::size_t reserved_now = arena.reserved_bytes();
  CHECK(arena.take(false) == frames.back());
  CHECK(arena.reserved_bytes() == reserved_now);
  for (std::byte* f : frames) arena.give(f, false);
  arena.give(small, true);
  CHECK(arena.used_bytes() == 0);
  CHECK(arena.reserved_bytes() == reserved_now);  // never shrinks below its peak
}
