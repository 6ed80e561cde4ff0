// The engine's public face: a paged, quantized KV cache with attention over it.
//
// Tokens enter a full-precision residual (F32 pages private to the sequence). A residual page
// is sealed - quantized into the configured K/V formats - when it is full and all its tokens
// are older than the `residual_tokens` most recent ones; residual_tokens = 0 seals a page as
// soon as it fills, and the open (partial) page is always full precision.
//
// Sealed pages are immutable and reference counted: fork() shares them (copy-on-write in the
// only form needed, since nothing writes into a sealed page) and copies the small residual,
// so a fork's writes never show in its parent. truncate() to inside the residual is exact; a
// truncate that reaches into a sealed page keeps that page's stored (dequantized) values for
// the kept tokens, which return to the residual.
//
// Non-finite K/V values are replaced by 0 when appended and counted (Telemetry::on_nan_inf):
// they never enter a page.
//
// Threading: the API is called from one thread; the cache runs its own work on its pool.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "attention/compensation.h"
#include "attention/l0_staging.h"
#include "attention/page_kernels.h"
#include "attention/paged_attention.h"
#include "geometry.h"
#include "memory/page_pool.h"
#include "memory/placement.h"
#include "memory/tiered_pool.h"
#include "quant/calibration.h"
#include "quant/page_layout.h"
#include "runtime/thread_pool.h"
#include "selection_plan.h"
#include "telemetry.h"

namespace kv {

using SeqId = std::uint32_t;

struct CacheConfig {
  ModelGeometry geometry;
  Format k_format = Format::F16;
  Format v_format = Format::F16;
  int v_group = 32;  // V scale group (32 or 64 channels), clamped to head_dim
  int page_tokens = kDefaultPageTokens;
  int residual_tokens = 0;
  bool pad_pages_to_4k = false;
  int threads = 0;  // 0: all cores
  Isa isa = Isa::Auto;
  int split_pages = kDefaultSplitPages;  // decode work unit: pages per task
  float outlier_factor = kDefaultOutlierFactor;
  float softmax_scale = 0.0f;  // 0: 1/sqrt(head_dim)
  // Tiers of the sealed pages: L1 cap, L2 directory, prefetch, watermarks, pins. The default
  // (no cap, no L2) keeps every page in L1.
  MemoryConfig memory;
};

// Throws InputError ("cache config: <field>: <reason>") for an impossible configuration.
void validate_cache_config(const CacheConfig& config);

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

// Options of one attention call.
struct AttendOptions {
  const SelectionPlan* plan = nullptr;  // attend to each kv head's planned pages (decode or prefill)
  // Decode only, out: per kv head, the attention mass of each attended page (the plan's pages,
  // or all), summed over the group's q heads - the heavy-hitter signal of H2O-style selection.
  std::vector<std::vector<float>>* page_mass = nullptr;
  // With a plan: every dropped page joins the softmax as one pseudo-token - the page's mean key
  // (logit + ln tokens) carrying its mean value - so the dropped mass is estimated instead of
  // lost (compensation mean_v).
  bool compensate = false;
  // The sequence's page_views(seq, layer), when the caller already built them this step.
  // Without them, a plan's pages are viewed on their own (compensation views them all).
  const std::vector<std::vector<PageView>>* views = nullptr;
  // Decode only, optional: [kv head][logical page] importance of every page (the sparse
  // selector's accumulated attention); the memory pool demotes the least important first.
  // Without it the cache accumulates the pages' attention mass itself (memory.importance_decay).
  const std::vector<std::vector<float>>* importance = nullptr;
};

struct CacheStats {
  std::size_t sealed_pages = 0;      // live physical pages (shared pages count once)
  std::size_t residual_pages = 0;
  std::size_t sealed_bytes = 0;
  std::size_t residual_bytes = 0;
  std::size_t peak_sealed_bytes = 0;
  std::uint64_t nan_inf_replaced = 0;
  MemoryStats memory;  // tiers: occupancy, swap traffic, prefetch and cache hit rates
};

class KVCache {
 public:
  explicit KVCache(const CacheConfig& config, Telemetry* telemetry = nullptr);
  ~KVCache();
  KVCache(const KVCache&) = delete;
  KVCache& operator=(const KVCache&) = delete;

  SeqId create_sequence();
  SeqId fork(SeqId parent);
  void release(SeqId seq);

  // k, v: [n_tokens][kv_heads][head_dim], post-RoPE K stored exactly as given.
  void append(SeqId seq, int layer, const float* k, const float* v, int n_tokens);
  // q: [n_queries][q_heads][head_dim] for the last n_queries stored positions (causal);
  // out like q. One query runs the fused decode kernel, more run the chunked prefill.
  void attend(SeqId seq, int layer, const float* q, int n_queries, float* out, const AttendOptions& options = {});
  // Every layer longer than new_length is cut to it (shorter layers, mid forward pass, stay).
  void truncate(SeqId seq, int new_length);

  int length(SeqId seq, int layer) const;
  void set_phase(Phase phase) { phase_ = phase; }
  Phase phase() const { return phase_; }

  // kv head h's pages of (seq, layer) in logical order: sealed pages, then the residual. A
  // sealed page that lives in L2 only has data == nullptr (its summaries are always there);
  // attend() makes the pages it reads resident.
  std::vector<std::vector<PageView>> page_views(SeqId seq, int layer) const;
  // The same into `views`, reusing its buffers (decode steps build them every step).
  void page_views(SeqId seq, int layer, std::vector<std::vector<PageView>>& views) const;
  // Every kv head's key bounds (Quest's input) without building page views: the sealed pages'
  // summaries in place, copies of the residual pages'. Valid until the sequence next changes.
  void key_bounds(SeqId seq, int layer, std::vector<HeadKeyBounds>& heads) const;
  // Danger under memory pressure asks for a smaller sparse budget: the count of such requests
  // so far. A sparse decoder serves each one it has not seen (SparseDecoder) and reports a
  // budget it did make smaller through budget_tightened().
  std::uint64_t budget_requests() const { return budget_requests_; }
  void budget_tightened();
  // Waits until pages demoted so far are on the L2 device (benchmarks, tests).
  void drain_memory() { sealed_pool_.drain(); }

  const CacheConfig& config() const { return config_; }
  const PageLayout& layout() const { return layout_; }
  const PageLayout& residual_layout() const { return residual_layout_; }
  Isa isa() const { return kernels_->isa; }
  CacheStats stats() const;
  ThreadPool& pool() { return pool_; }

 private:
  struct HeadPages {
    std::vector<PageId> sealed;
    std::vector<PageId> residual;
    // Page summaries that selection and compensation read without touching the pages, f16:
    // [sealed page][key_min, key_max][head_dim] and [sealed page][key_mean, value_mean][head_dim].
    std::vector<std::uint16_t> sealed_bounds;
    std::vector<std::uint16_t> sealed_means;
    std::vector<bool> pinned;  // per sealed page: this sequence holds a pin (sink or window)
  };
  struct LayerState {
    int length = 0;
    int sealed_tokens = 0;
    std::vector<HeadPages> heads;
    // The last selections (oldest first) per kv head, for prefetch prediction.
    std::deque<std::vector<SelectionRecord>> history;
  };
  struct Sequence {
    std::vector<LayerState> layers;
  };

  Sequence& sequence(SeqId seq, const char* api);
  const Sequence& sequence(SeqId seq, const char* api) const;
  void check_layer(int layer, const char* api) const;
  std::uint64_t copy_into_residual(LayerState& state, const float* k, const float* v, int n_tokens);
  void seal_ready_pages(LayerState& state, int layer);
  void seal_page(int layer, int head, int logical_page, PageId residual, PageId sealed, PageSealed& event,
                 std::uint16_t* means);
  void truncate_layer(LayerState& state, int new_length);
  PageId new_residual_page();
  void append_summary(HeadPages& head, const std::byte* page, const std::uint16_t* means) const;
  void widen_key_bounds(std::byte* page, const float* key);
  PageView view_of(const LayerState& state, std::size_t head, std::size_t page) const;
  void plan_views(const LayerState& state, const SelectionPlan& plan, const std::vector<std::vector<PageView>>* all);
  void compensate_dropped(const SelectionPlan& plan, const float* q, const std::vector<std::vector<PageView>>& all);
  void release_layer(LayerState& state);
  void update_pins(LayerState& state);
  bool requantize_page(PageId id);
  void apply_relief(const TieredPool::Relief& relief);
  void sync_memory();
  // views_' sealed pages at positions [begin, end) of every head: made resident and held.
  void acquire_pages(const LayerState& state, std::size_t begin, std::size_t end);
  std::size_t sealed_bytes(std::size_t begin, std::size_t end) const;
  // Bytes of sealed pages one attention call may hold at once under an L1 cap (0: no limit).
  std::size_t stream_batch_bytes() const;
  void finish_memory_step(LayerState& state, bool decode, const SelectionPlan* plan, const std::vector<std::vector<float>>* mass,
                          const AttendOptions& options);
  void forward_memory_reports();

  CacheConfig config_;
  Telemetry* telemetry_;
  PageLayout layout_;
  PageLayout residual_layout_;
  PageLayout long_tail_layout_;  // q2/q2: danger requantizes the long tail into it
  ThreadPool pool_;
  const PageKernels* kernels_;
  TieredPool sealed_pool_;
  PagePool residual_pool_;
  std::vector<Calibration> calibration_;  // [layer][kv_head]
  std::unordered_map<SeqId, Sequence> sequences_;
  SeqId next_seq_ = 0;
  Phase phase_ = Phase::Prefill;
  std::uint64_t nan_inf_replaced_ = 0;
  std::uint64_t budget_requests_ = 0;
  AttentionWorkspace workspace_;
  std::vector<float> page_lse_, query_lse_, extra_states_;
  DroppedPages dropped_;  // compensation's gather, reused across heads and calls
  std::vector<std::size_t> mass_offset_;  // [kv head]: its first entry in page_lse_
  std::vector<std::vector<PageView>> views_;      // the pages one attend() call reads
  std::vector<std::vector<PageView>> all_views_;  // all pages, when attend() built them
  std::vector<PageId> step_pages_;                // the sealed pages of views_, head after head
  std::vector<const std::byte*> step_frames_;
  std::uint64_t step_read_bytes_ = 0;
  std::vector<std::vector<float>> own_mass_;  // page masses the cache asks for itself
  L0Stager l0_;  // l0_copy: the L0 stand-in
};

}  // namespace kv
