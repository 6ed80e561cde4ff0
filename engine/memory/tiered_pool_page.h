// A page's full record in the pool, shared by the files that implement TieredPool (residence,
// L2 traffic, pressure). Not part of the pool's interface: only tiered_pool*.cpp include it.
#pragma once

#include <atomic>
#include <cstdint>

#include "memory/tiered_pool.h"

namespace kv {

struct TieredPool::Page {
  FrameClass cls = FrameClass::Page;  // the frame's class (LongTail: requantized to INT2)
  bool read_only = false;  // sealed for good (an image's page): never written or requantized again
  std::byte* frame = nullptr;  // L1 copy
  L2Slot slot = kNoSlot;       // L2 copy
  std::atomic<std::uint32_t> version{0};
  std::uint32_t refcount = 0;
  std::uint32_t pins = 0;
  bool prefetched = false;  // the L1 copy came from a prefetch and no step has read it yet
  std::uint64_t predicted_at = 0;  // a step predicted to read the page (demoted last until then)
  std::uint64_t demoted_at = 0;    // swap_out_bytes when it was demoted (its place in the write stream)
  Migrator::Load load;  // shared with the migrator, under its lock
};


}  // namespace kv
