// The engine's public face: a paged, quantized KV cache with attention over it - a facade over
// its parts (docs/engine.md): the page table (page_table.h), the residual and its sealing
// (sealer.h), the attention call (attention/attend_call.h over resident_pages.h), the memory
// advisor (memory/memory_advisor.h) and the tiered pool of sealed pages (memory/tiered_pool.h).
//
// Tokens enter a full-precision residual and are sealed - quantized - page by page (sealer.h).
// Sealed pages are immutable and reference counted: fork() shares them and copies the small
// residual, so a fork's writes never show in its parent. truncate() to inside the residual is
// exact; a truncate that reaches into a sealed page keeps that page's stored (dequantized)
// values for the kept tokens, which return to the residual.
//
// Non-finite K/V values are replaced by 0 when appended and counted (Telemetry::on_nan_inf):
// they never enter a page.
//
// Threading: the API is called from one thread; the cache runs its own work on its pool.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "attention/attend_call.h"
#include "cache_config.h"
#include "memory/memory_advisor.h"
#include "memory/page_pool.h"
#include "memory/tiered_pool.h"
#include "page_table.h"
#include "speculative/commit_plan.h"
#include "prefix_cache.h"
#include "resident_pages.h"
#include "runtime/thread_pool.h"
#include "sealer.h"
#include "selection_plan.h"
#include "telemetry.h"

namespace kv {

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
  // Decode only, optional, in and out: [kv head][logical page] the sparse selector's
  // accumulated attention, already decayed for this step. The call adds each attended page's
  // attention mass to it - the one place it accumulates - and the memory pool, which demotes
  // the least important pages first, takes its sealed pages' values. Without it the pool
  // accumulates the pages' attention mass itself (memory.importance_decay).
  std::vector<std::vector<float>>* importance = nullptr;
};

// What a cache call leaves to its caller. Danger under memory pressure asks the sparse policy,
// which lives above the cache, for a smaller budget: the requests raised since the previous
// outcome was handed out (by this call, or by a call that returns none: fork, release,
// truncate, add_image, a prefix or commit). The owner of the sparse policy applies them
// (SparseDecoder::apply), each halving its budget once; a caller without one has no budget to
// tighten and may drop the outcome.
struct CacheOutcome {
  int budget_requests = 0;
};

struct CacheStats {
  std::size_t sealed_pages = 0;      // live physical pages (shared pages count once)
  std::size_t read_only_pages = 0;   // of them, an image's (add_image)
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
  CacheOutcome append(SeqId seq, int layer, const float* k, const float* v, int n_tokens);
  // q: [n_queries][q_heads][head_dim] for the last n_queries stored positions (causal);
  // out like q. One query runs the fused decode kernel, more run the chunked prefill.
  CacheOutcome attend(SeqId seq, int layer, const float* q, int n_queries, float* out, const AttendOptions& options = {});
  // Every layer longer than new_length is cut to it (shorter layers, mid forward pass, stay).
  // Throws InputError, before any layer is cut, for a cut inside an image's read-only pages
  // (add_image); a cut before the image drops it whole.
  void truncate(SeqId seq, int new_length);
  // Tokens [begin, end) of the sequence are an image's (begin on a page boundary), declared
  // before they are appended: each whole page of it is sealed as soon as it fills, however
  // recent (residual_tokens does not hold it back; the text pages before it seal first), and is
  // read-only from then on - never written, requantized or cut into again, never part of the
  // text window that memory pins. A last page the image shares with the text after it stays a
  // text page. Pages of it already sealed (shared from a cached prefix) become read-only at
  // once, as they are (a page danger requantized before stays so). Returns the image's
  // read-only pages a layer. Throws InputError (field begin, end or seq) for a range off a page
  // boundary, beyond max_seq or starting inside an earlier image's whole pages, and for a
  // tentative sequence.
  int add_image(SeqId seq, int begin, int end);

  // The prefix cache (CacheConfig::prefix_cache; prefix_cache.h). The longest whole-page prefix
  // of `tokens` an earlier prompt left cached: a plan, nothing shared yet (empty when the cache
  // is off).
  PrefixPlan lookup_prefix(std::span<const TokenId> tokens);
  // An empty sequence shares the plan's pages: its length becomes plan.tokens(), and the caller
  // appends the rest of its prompt.
  void share_prefix(SeqId seq, const PrefixPlan& plan);
  // After `tokens` were appended to seq (a prompt): its whole sealed pages join the cache.
  // Returns the page positions added (0 when the cache is off).
  std::size_t cache_prefix(SeqId seq, std::span<const TokenId> tokens);
  // Drops up to `positions` cached page positions, least recently used first.
  std::size_t evict_prefixes(std::size_t positions);
  PrefixStats prefix_stats() const;
  // The cache's and its tiers' counters from zero and their peaks at today's levels, with every
  // page, cached prefix and tier placement kept: a repetition that starts from a warm prefix
  // cache (a warm-up pass) counts only what follows. Call between steps, with telemetry to
  // whoever should not see the warm-up closed until after it (TelemetryGate).
  void reset_counters();

  // Speculative decoding (speculative/commit_plan.h): from now on the sequence's appends are
  // tentative - kept in the residual, sealing nothing - until a commit. Throws InputError for a
  // sequence already tentative or whose layers hold different lengths.
  void begin_tentative(SeqId seq);
  bool tentative(SeqId seq) const { return tentative_.count(seq) != 0; }
  // What committing the first `keep` tentative tokens would do (keep 0: a rollback).
  CommitPlan plan_commit(SeqId seq, int keep) const;
  // Keeps the plan's tokens, drops the rest, ends the tentative state and seals what the kept
  // tokens made ready. Throws InputError for a plan the sequence has moved on from.
  void apply_commit(const CommitPlan& plan);

  int length(SeqId seq, int layer) const;
  // Prefill, or decode; the first decode step after a prefill is told apart in the memory
  // figures (it has no selection history), up to end_decode_step().
  void set_phase(Phase phase);
  // A decode step (every layer) ended (SparseDecoder::end_step()).
  void end_decode_step();
  // The end of a prefill: `plan` is what the prompt's last query selects in (seq, layer), the
  // best guess at the first decode step's selection. It joins the layer's selection history,
  // and the pages it and the prediction from it name are prefetched and demoted last.
  void predict_next(SeqId seq, int layer, const SelectionPlan& plan);
  // Whether sealed pages can live in L2 (an L1 cap with an L2 tier): what predict_next serves.
  bool offloads() const { return sealed_pool_.l2_enabled(); }
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
  // Waits until pages demoted so far are on the L2 device (benchmarks, tests).
  void drain_memory() { sealed_pool_.drain(); }

  const CacheConfig& config() const { return config_; }
  const PageLayout& layout() const { return layout_; }
  const PageLayout& residual_layout() const { return residual_layout_; }
  // An image's whole pages' layout (KVCache::add_image): the visual formats, or layout().
  const PageLayout& visual_layout() const { return visual_layout_; }
  Isa isa() const { return kernels_->isa; }
  CacheStats stats() const;
  ThreadPool& pool() { return pool_; }

 private:
  // Seals the layer's ready pages (an image's as soon as they fill); seal() then relieves memory
  // pressure, seal_pages() leaves that to the caller. seal_pages returns whether it sealed any.
  void seal(SeqId seq, int layer);
  bool seal_pages(SeqId seq, int layer);
  // The layer's image pages sealed at or after logical page `from_page` become read-only;
  // returns them.
  std::vector<PageId> mark_image_pages(LayerPages& state, int from_page);
  // After pages of the layer were marked: the window's pins, then (visual.tier l2) the marked
  // pages leave L1 for L2.
  void update_image_layer(LayerPages& state, const std::vector<PageId>& marked);
  // Telemetry of the demotions sealing caused since `before` (they are the caller's traffic).
  void report_demotions(const TrafficCounters& before);
  bool requantize_page(PageId id);
  void apply_relief(const TieredPool::Relief& relief);
  // The outcome so far, handed out once.
  CacheOutcome take_outcome() { return std::exchange(pending_, {}); }
  void update_memory_pressure();
  // Bytes of sealed pages one attention call may hold at once under an L1 cap (0: no limit).
  std::size_t stream_batch_bytes(bool prompt) const;
  // Each kv head's sealed pages, as the memory advisor takes them.
  static std::vector<const std::vector<PageId>*> sealed_pages(const LayerPages& state);
  // Attention calls for which a prediction protects its pages: lookahead rounds of the layers.
  std::uint64_t prediction_horizon() const;
  void end_pool_step(SeqId seq, LayerPages& state, int layer, bool decode, const SelectionPlan* plan, const std::vector<std::vector<float>>* mass,
                          const AttendOptions& options);
  void report_attention(const LayerPages& state, int n_queries, bool planned, const TrafficCounters& moved);
  void forward_memory_reports();
  CacheLayouts layouts() const;  // the pages' layouts by frame class

  CacheConfig config_;
  Telemetry* telemetry_;
  PageLayout layout_;
  PageLayout residual_layout_;
  PageLayout long_tail_layout_;  // q2/q2: danger requantizes the long tail into it
  PageLayout visual_layout_;     // an image's whole pages (the sealed layout without visual formats)
  ThreadPool pool_;
  const PageKernels* kernels_;
  TieredPool sealed_pool_;
  PagePool residual_pool_;
  PageTable table_;  // after the pools: its pins and pages go back to them first
  std::unique_ptr<PrefixCache> prefix_;  // with prefix_cache; after the table and the pools, so its references go first
  Sealer sealer_;
  MemoryAdvisor advisor_;
  ResidentPages resident_;
  AttendCall call_;
  Phase phase_ = Phase::Prefill;
  bool first_decode_step_ = false;  // a prefill ran since the last decode step ended
  std::uint64_t nan_inf_replaced_ = 0;
  CacheOutcome pending_;  // what the next outcome hands out (apply_relief fills it)
  std::unordered_map<SeqId, int> tentative_;  // speculating sequences -> length when it began
  std::vector<std::vector<float>> cache_page_mass_;  // page masses the cache asks for itself (importance)
};

}  // namespace kv
