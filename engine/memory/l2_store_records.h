// The records behind an L2Store - its slots, segment files and write batches - shared by the
// files that implement it (l2_store.cpp: writes, compaction, lifetime; l2_store_read.cpp:
// reads). Not part of the store's interface.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "memory/l2_store.h"

namespace kv {

inline std::size_t align_up(std::size_t n) { return (n + kL2Align - 1) / kL2Align * kL2Align; }
inline std::size_t align_down(std::size_t n) { return n / kL2Align * kL2Align; }

// Memory aligned for O_DIRECT (kL2Align), grown as needed: a write batch's, or a reader's bounce
// buffer for a span that does not start and end on the alignment.
struct AlignedBuffer {
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> data;
  std::size_t bytes = 0;

  void reserve(std::size_t n) {
    if (n <= bytes) return;
    void* p = std::aligned_alloc(kL2Align, align_up(n));
    if (p == nullptr) throw std::bad_alloc();
    data.reset(static_cast<std::byte*>(p));
    bytes = align_up(n);
  }
};

struct L2Store::Slot {
  std::uint32_t segment = 0;
  std::uint64_t offset = 0;  // in the segment file
  std::uint32_t bytes = 0;
  std::uint64_t checksum = 0;
  Batch* batch = nullptr;  // the unwritten batch holding the page, if any
  bool live = false;
};

struct L2Store::Segment {
  std::string path;
  int fd = -1;
  std::uint64_t used = 0;  // bytes reserved by batches, a multiple of 4 KiB
  std::uint64_t live_bytes = 0, dead_bytes = 0, live_pages = 0;
  int pending_batches = 0;
  int reads_in_flight = 0;
};

struct L2Store::Batch {
  enum class State : std::uint8_t { Free, Filling, Full, Writing, Failed };
  AlignedBuffer buffer;
  std::size_t capacity = 0;
  std::size_t used = 0;
  std::size_t appended = 0;  // of `used`, page bytes from append() (compaction's relocations excluded)
  std::uint32_t segment = 0;
  std::uint64_t file_offset = 0;
  State state = State::Free;
  std::vector<L2Slot> slots;
};

}  // namespace kv
