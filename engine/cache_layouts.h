// The page layouts of one cache: the sealed pages' of each frame class and the residual's.
#pragma once

#include "memory/frame_arena.h"
#include "quant/page_layout.h"

namespace kv {

struct CacheLayouts {
  const PageLayout* sealed = nullptr;     // the policy's K/V formats
  const PageLayout* residual = nullptr;   // F32, before sealing
  const PageLayout* long_tail = nullptr;  // a sealed page requantized in danger
  const PageLayout* visual = nullptr;     // an image's page in the visual block's formats (none: sealed)

  // The layout of a sealed page of the class.
  const PageLayout* of(FrameClass cls) const {
    return cls == FrameClass::LongTail ? long_tail : cls == FrameClass::Visual ? visual : sealed;
  }
};

}  // namespace kv
