// The residual and its sealing. Tokens enter a full-precision residual (F32 pages private to the
// sequence). A residual page is sealed - quantized into the configured K/V formats, watched by
// its head's calibration - when it is full and all its tokens are older than the
// `residual_tokens` most recent ones; residual_tokens = 0 seals a page as soon as it fills, and
// the open (partial) page is always full precision. The owner may ask for every whole page before
// a position at once (an image's, KVCache::add_image). A truncate that reaches into a sealed page
// returns the page's kept tokens, as stored (dequantized), to the residual.
#pragma once

#include <cstdint>
#include <vector>

#include "cache_config.h"
#include "cache_layouts.h"
#include "memory/frame_arena.h"
#include "page_table.h"
#include "quant/calibration.h"
#include "runtime/thread_pool.h"
#include "telemetry.h"

namespace kv {

class Sealer {
 public:
  // layouts.visual set: an image's whole pages seal in it, in frames of their own class, and
  // calibrate apart from the text (image K/V are not the text's distribution).
  using Layouts = CacheLayouts;
  // Everything given outlives the sealer; `telemetry` may be null.
  Sealer(const CacheConfig& config, Layouts layouts, PageTable& table, TieredPool& sealed, PagePool& residual,
         ThreadPool& pool, Telemetry* telemetry);

  // Copies n_tokens rows (k, v: [n_tokens][kv_heads][head_dim]) into the layer's residual,
  // non-finite values replaced by 0; returns how many were replaced.
  std::uint64_t append(LayerPages& state, const float* k, const float* v, int n_tokens);

  // What one sealing pass did, reported by the owner once the pool has taken the new pages in.
  struct Sealed {
    std::vector<PageSealed> events;  // head after head, pages in order
    OpCounts ops;                     // residual read, sealed pages written, values quantized
  };
  // Seals the layer's ready residual pages (none: an empty result); with through_tokens, also
  // every whole page before that position, however new (an image's pages at its end).
  Sealed seal_ready(SeqId seq, int layer, Phase phase, int through_tokens = 0);

  // Cuts (seq, layer) to new_length tokens (shorter than its length).
  void truncate(SeqId seq, int layer, int new_length);

 private:
  PageId new_residual_page();
  void clear_key_bounds(std::byte* page) const;
  void widen_key_bounds(std::byte* page, const float* key) const;
  // cls: Visual for an image's whole page where the cache has a visual layout (sealed in it),
  // else Page.
  void seal_page(int layer, int head, int logical_page, Phase phase, FrameClass cls, PageId residual, PageId sealed,
                 PageSealed& event, std::uint16_t* means);

  const CacheConfig& config_;
  Layouts layouts_;
  PageTable& table_;
  TieredPool& sealed_;
  PagePool& residual_;
  ThreadPool& pool_;
  Telemetry* telemetry_;
  std::vector<Calibration> calibration_;         // [layer][kv_head]
  std::vector<Calibration> visual_calibration_;  // [layer][kv_head] of image pages; empty without a visual layout
};

}  // namespace kv
