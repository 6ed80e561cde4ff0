// Attention through a real L0 arena (the SRAM stand-in of memory.l0_copy): a decode step's pages
// are copied into halves of the arena in batches (runs of page positions, every kv head's page
// at each position) and the kernels read the copies. While the kernels read one half, the
// engine pool's background thread copies the next batch into the other (double buffering).
// Each batch is a partial attention whose (output, log-sum-exp) merge in order through
// SoftmaxState, like pages in a batch, so the result is the direct call's up to rounding.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>
#include <vector>

#include "attention/paged_attention.h"

namespace kv {

class L0Stager {
 public:
  // l0_bytes: the arena, allocated on first use; half of it must hold one page of every kv head.
  explicit L0Stager(std::size_t l0_bytes) : l0_bytes_(l0_bytes) {}

  // One decode call over `whole.pages` (every kv head the same page count), staged. Throws
  // InputError ("memory config: l0_bytes") when half of L0 cannot hold one page of every kv head.
  void attend(const PageKernels& kernels, ThreadPool& pool, const PagedAttentionArgs& whole, AttentionWorkspace& workspace);

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::size_t l0_bytes_;
  std::unique_ptr<std::byte, Free> arena_;
};

}  // namespace kv
