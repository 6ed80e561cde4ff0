// What a KV cache is built from: the model geometry, the page formats and sizes, the decode
// kernels' work split and the memory tiers - and the checks that refuse an impossible one.
#pragma once

#include <cstddef>
#include <cstdint>

#include "attention/paged_attention.h"
#include "geometry.h"
#include "memory/tiered_pool.h"
#include "quant/page_layout.h"
#include "quant/calibration.h"
#include "runtime/isa.h"

namespace kv {

// Where an image's whole pages live once sealed: in L1 like text pages (demoted under pressure),
// or written to L2 at once and read from there (L1 holds them only as a read cache).
enum class VisualTier : std::uint8_t { L1, L2 };

// An image's whole pages (the policy's visual block): K/V formats and a V group of their own
// (`own`; without, the policy's, like text) and their tier.
struct VisualPages {
  bool own = false;
  Format k_format = Format::Q4;
  Format v_format = Format::Q4;
  int v_group = 128;
  VisualTier tier = VisualTier::L1;
};

struct CacheConfig {
  ModelGeometry geometry;
  Format k_format = Format::F16;
  Format v_format = Format::F16;
  int v_group = 32;  // V scale group: a multiple of 8 that divides head_dim (one wider is the whole head)
  int page_tokens = kDefaultPageTokens;
  int residual_tokens = 0;
  bool pad_pages_to_4k = false;
  int threads = 0;  // 0: all cores
  // Every part of the cache's work on the calling thread: one thread, L0 copies on it (its pool's
  // Background::Inline) and L2 I/O on it (memory.l2.synchronous), so that what the calling thread
  // executes is the whole work - the sim clock counts that thread alone. serial_config() sets all
  // three; validate_cache_config() refuses a serial config that lacks one.
  bool serial = false;
  Isa isa = Isa::Auto;
  int split_pages = kDefaultSplitPages;  // decode work unit: pages per task
  float outlier_factor = kDefaultOutlierFactor;
  float softmax_scale = 0.0f;  // 0: 1/sqrt(head_dim)
  // Tiers of the sealed pages: L1 cap, L2 directory, prefetch, watermarks, pins. The default
  // (no cap, no L2) keeps every page in L1.
  MemoryConfig memory;
  // Whole sealed pages of prompts kept for later requests with the same prefix (prefix_cache.h).
  bool prefix_cache = false;
  // The most bytes the prefix cache names (its pages at full size and their summaries); past it
  // an insert drops the least recently used leaves. 0: no cap (the tiers' budgets still apply).
  std::size_t prefix_cache_bytes = 0;
  // Names the model whose K/V the cache holds: pages of different models never share.
  std::uint64_t model_key = 0;
  VisualPages visual;
  // Exists only to test gates (a policy's test_repeat_attention): every attention call runs its
  // page kernels again, into scratch, for this share of its (kv head, page) items - a slowdown
  // defined in work, the same size on every run however busy the machine. Results unchanged.
  double test_repeat_attention = 0.0;
};

// Throws InputError ("cache config: <field>: <reason>") for an impossible configuration.
void validate_cache_config(const CacheConfig& config);

// `config` with all of its work on the calling thread (CacheConfig::serial).
CacheConfig serial_config(CacheConfig config);

// The page layout of `config` with K and V stored as `k` and `v` (the sealed pages', the F32
// residual's, the INT2 long tail's).
PageLayout cache_page_layout(const CacheConfig& config, Format k, Format v);
// An image's whole pages' layout: the visual formats where the config has them, else the sealed one.
PageLayout visual_page_layout(const CacheConfig& config);
// Page frames are aligned for direct I/O when pages are padded to 4 KiB.
std::size_t cache_page_alignment(const CacheConfig& config);

// The least L1 capacity (the cap of a cache with `config.geometry`) that lets every layer run a
// context of `context_tokens` without going over the cap: per layer and kv head, the pinned sink
// and window pages, the full-precision residual and the page summaries (selection's index), which
// no demotion can free, and room for the attention call in flight to hold one page position. A
// prefill chunk passes through the residual while it is appended and sealed, uncounted.
struct L1Minimum {
  std::size_t bytes = 0;
  int pinned_pages = 0;    // per layer and kv head
  int residual_pages = 0;  // per layer and kv head
};
L1Minimum minimum_l1_bytes(const CacheConfig& config, int context_tokens);

}  // namespace kv
