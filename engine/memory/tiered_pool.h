// The heterogeneous memory pool behind the page table: physical pages that live in L1 (a DRAM
// arena with a hard capacity) and/or L2 (l2_store.h), staged through L0 each step, moved by a
// migrator thread (migrator.h), and kept within capacity by a pressure controller.
//
// A page's bytes never change once sealed; a page may have an L1 copy (its frame), an L2 copy
// (its slot), or both (the L1 copy is then a clean read-cache entry that demotion just drops).
// The decode path acquires the pages of a step: resident pages are used in place, pages being
// prefetched are waited for, other L2 pages are loaded on demand; the wait is dma_wait. While
// acquired, pages are neither demoted nor overwritten. A frame being written by the migrator has
// an odd version; readers check that a page's version is even and unchanged across its use.
//
// Decisions (what to demote, what to prefetch, pressure levels) are made on the owner's thread
// from the step count and the selection history (placement.h), so byte counts and hit rates
// repeat exactly; the migrator only performs them. The owner calls everything but the
// constructor's thread from one thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "memory/frame_arena.h"
#include "memory/l2_store.h"
#include "memory/memory_events.h"
#include "memory/migrator.h"
#include "memory/page_pool.h"
#include "memory/pressure_controller.h"
#include "runtime/error.h"

namespace kv {

struct MemoryConfig {
  std::size_t l0_bytes = 8u << 20;  // on-chip SRAM stand-in; steps stage pages in halves of it
  bool l0_copy = false;             // decode steps copy their pages into a real L0 arena (default: accounted)
  std::size_t l1_bytes = 0;         // L1 capacity; 0: no cap (and no demotion)
  L2Config l2;                      // l2.dir empty: no L2 tier
  int prefetch_lookahead = 2;       // steps of selection history and lookahead; 0: no prefetch
  double warning_free = 0.15;       // warning when the free share of L1 is at or below this
  double target_free = 0.25;        // demotion in warning frees L1 up to this share
  // Danger is entered when demotion cannot bring L1 free above warning_free; at or above this
  // share of L1 in pinned bytes the danger event names the pinned pages as the reason.
  double danger_pinned = 0.95;
  // Optional watermark on the machine: below this MemAvailable (/proc/meminfo) L1 counts as
  // full (demotion, then danger). 0: off (the default: it makes runs depend on the machine).
  std::size_t mem_available_floor_bytes = 0;
  std::size_t demote_batch_pages = 64;  // pages per demotion batch
  int pin_sink_tokens = 4;          // pages holding the first tokens stay in L1
  int pin_window_tokens = 256;      // pages overlapping the most recent tokens stay in L1
  float importance_decay = 0.9f;    // per step, when the cache accumulates importance itself
  // A decode step whose kept pages are at least this share new (not kept by its kv head's
  // previous step) reports a selection_shift event with the loads it caused; with L2 only.
  double selection_shift = 0.3;
};

// Throws InputError("memory config", field, reason).
void validate_memory_config(const MemoryConfig& config);

struct MemoryStats {
  std::uint64_t l1_capacity_bytes = 0;
  std::uint64_t l1_used_bytes = 0;  // frames in use plus external (residual) bytes
  std::uint64_t peak_l1_bytes = 0;
  std::uint64_t pinned_bytes = 0;
  std::uint64_t frame_bytes = 0;    // L1 frames reserved (the arena's size)
  std::uint64_t l0_staged_bytes = 0;
  std::uint64_t l0_batches = 0;
  std::uint64_t peak_l0_bytes = 0;
  std::uint64_t swap_in_bytes = 0;   // page bytes loaded from L2 (demand and prefetch)
  std::uint64_t swap_out_bytes = 0;  // page bytes demoted to L2
  std::uint64_t l2_bytes_written = 0;  // device bytes (padding and compaction included)
  std::uint64_t l2_flushed_device_bytes = 0;  // of intact batches (L2Stats::flushed_device_bytes)
  std::uint64_t l2_flushed_page_bytes = 0;    // the appended page bytes those batches carried
  std::uint64_t l2_live_bytes = 0;
  std::uint64_t l2_compaction_bytes = 0;  // live page bytes compaction rewrote (timing-dependent)
  std::uint64_t peak_l2_bytes = 0;     // segment bytes on disk
  std::uint64_t pages_read = 0;        // pages acquired by steps
  std::uint64_t cold_reads = 0;        // of them, pages with an L2 copy
  std::uint64_t cold_hits = 0;         // of those, served by an L1 copy (read cache, prefetch)
  std::uint64_t demand_loads = 0;      // pages the decode path had to load itself
  std::uint64_t prefetch_loads = 0;
  std::uint64_t demand_bytes = 0, prefetch_bytes = 0;  // their page bytes (sum: swap_in_bytes)
  // Of the loads, pages demoted less than one write batch ago (by demoted bytes): in memory.
  std::uint64_t buffered_demand = 0, buffered_prefetch = 0;
  std::uint64_t demand_waits = 0;      // acquisitions that loaded at least one page from the device
  std::uint64_t prefetch_hits = 0;     // steps' pages that a prefetch had brought (or was bringing)
  std::uint64_t prefetch_unused = 0;   // prefetched pages dropped or freed before any use
  std::uint64_t prefetch_unused_bytes = 0;  // their page bytes
  std::uint64_t pages_waited = 0;      // pages the decode path waited for (timing-dependent)
  // By decode phase (StepKind): the first decode step after a prefill, which has no selection
  // history of its own, and the decode steps after it.
  std::uint64_t decode_cold_reads = 0, decode_cold_hits = 0;  // cold_reads, cold_hits of decode steps
  std::uint64_t first_step_pages = 0;          // sealed pages the first steps read
  std::uint64_t first_step_demand_loads = 0;
  std::uint64_t first_step_dma_wait_ns = 0;
  std::uint64_t later_prefetch_hits = 0, later_demand_loads = 0;
  std::uint64_t later_unpredictable_loads = 0;  // of the demand loads: no earlier query could predict them
  std::uint64_t later_dma_wait_ns = 0;
  // Cross-layer prediction (NextLayerAgreement): pages a layer took up at a decode step, of
  // those the next layer read at the same step, and pages predicted for the next layer.
  std::uint64_t next_layer_offered = 0, next_layer_read = 0, next_layer_predicted = 0;
  std::uint64_t decode_read_ios = 0;   // L2 read I/Os completed during decode steps (timing-dependent)
  std::uint64_t decode_steps = 0;      // decode attention calls (one per layer and token)
  std::uint64_t read_only_resident_sum = 0;  // read-only (image) pages with an L1 copy, summed over the decode calls
  std::uint64_t l2_read_ios = 0, l2_device_bytes_read = 0;
  std::uint64_t summary_index_bytes = 0;  // peak of the page-summary index in L1 (part of the external bytes)
  std::uint64_t demotions = 0;         // pages written to L2
  std::uint64_t drops = 0;             // clean L1 copies dropped
  std::uint64_t requantized_pages = 0;  // long-tail pages requantized to INT2 in danger
  std::uint64_t dma_wait_ns = 0;
  std::uint64_t l2_read_ns = 0, l2_write_ns = 0;
  PressureLevel level = PressureLevel::Safe;
  bool l2_enabled = false;
  bool l2_failed = false;
  std::string l2_mode, l2_fs_type;
  bool l2_on_ram = false;

  double prefetch_hit_rate() const;   // prefetch_hits / (prefetch_hits + demand_loads)
  // Over the decode steps after the first: hits / (hits + demand loads), and hits / (hits +
  // the demand loads an earlier query could have predicted).
  double prefetch_hit_rate_after_first() const;
  double prefetch_hit_rate_predictable() const;
  double l1_cache_hit_rate() const;   // cold_hits / cold_reads
  double l1_cache_hit_rate_decode() const;  // the same over decode steps
  double write_amplification() const; // l2_flushed_device_bytes / l2_flushed_page_bytes (>= 1; 0: none)
  double swap_in_gb_per_s() const;    // swap_in_bytes / L2 read time (decimal GB/s)
  double swap_out_gb_per_s() const;   // device bytes written / L2 write time
};

// The pool's L2 traffic counters at one moment; the difference of two is what happened between
// them (one attention call's or one append's moves, for the cost model's op counts).
struct TrafficCounters {
  std::uint64_t swap_in_bytes = 0, swap_out_bytes = 0;  // page bytes loaded from / demoted to L2
  std::uint64_t demand_loads = 0, demand_bytes = 0;
  std::uint64_t prefetch_loads = 0, prefetch_bytes = 0;
  // Loads of pages demoted less than one write batch before (MemoryStats).
  std::uint64_t buffered_demand = 0, buffered_prefetch = 0;
  std::uint64_t demand_waits = 0;
  std::uint64_t demotions = 0;
};
TrafficCounters operator-(const TrafficCounters& later, const TrafficCounters& earlier);

// What the pool's owner is running, for the figures by phase.
enum class StepKind : std::uint8_t { Prefill, FirstDecode, Decode };

// MemAvailable from /proc/meminfo in bytes; 0 when it cannot be read.
std::uint64_t mem_available_bytes();

class TieredPool {
 public:
  // page_bytes: a multiple of alignment. Throws InputError for a bad config or L2 directory.
  TieredPool(std::size_t page_bytes, std::size_t alignment, const MemoryConfig& config);
  ~TieredPool();
  TieredPool(const TieredPool&) = delete;
  TieredPool& operator=(const TieredPool&) = delete;

  // A new page with an L1 frame of the class (refcount 1). May demote others first; never fails
  // for lack of L1 (the overflow is an event).
  PageId allocate(FrameClass cls = FrameClass::Page);
  // Demotes until `bytes` of new frames fit under the L1 cap (as far as demotion can go): a batch
  // of pages allocated together - a prefill chunk being sealed - must fit like one page loaded on
  // demand. Pages allocated but not yet filled are never demoted: call this before allocating.
  void make_room(std::size_t bytes);
  void retain(PageId id);
  void release(PageId id);
  // The L1 frame of a resident page (a new page's, to fill it), or nullptr when in L2 only.
  // Throws InputError for a read-only page: its bytes are never written again.
  std::byte* frame(PageId id);
  const std::byte* frame(PageId id) const;
  // Where a page lives, from a dense array (a page's full record is ~100 bytes, and building a
  // long sequence's page views every step would touch all of them).
  struct Residence {
    const std::byte* frame = nullptr;  // nullptr: in L2 only
    FrameClass cls = FrameClass::Page;  // its layout (a long-tail or an image's page, or the policy's)
  };
  // Inline: decode steps ask for every page they view.
  Residence residence(PageId id) const {
    KV_ASSERT(id < residence_.size(), "unknown page id");
    return residence_[id];
  }
  std::size_t live_pages() const { return live_; }
  std::size_t peak_live_pages() const { return peak_live_; }
  std::size_t page_bytes() const { return page_bytes_; }
  std::size_t class_bytes(FrameClass cls) const { return frames_.class_bytes(cls); }
  // L1 bytes that demotion can never free: pinned pages and the external (residual) bytes.
  std::size_t pinned_bytes() const { return pinned_pages_ * page_bytes_ + external_bytes_; }
  // Pages that fit in L1 below the warning watermark beside what demotion cannot free (pinned
  // pages and the external bytes): the room steps and prefetch share. SIZE_MAX without a cap.
  std::size_t room_pages() const;
  // L1 bytes of resident pages a coming step is predicted to read (demoted last). A scan of
  // every page: for calls that stream many pages, not per page.
  std::size_t predicted_resident_bytes() const;

  void pin(PageId id);
  void unpin(PageId id);
  // How much the owner expects the page to be read (demotion takes the least important first).
  // Inline and dense: the owner sets every page's importance after each decode step.
  void set_importance(PageId id, float importance) {
    KV_ASSERT(id < importance_.size(), "unknown page id");
    importance_[id] = importance;
  }
  float importance(PageId id) const {
    KV_ASSERT(id < importance_.size(), "unknown page id");
    return importance_[id];
  }
  // Bytes of L1 used outside the pool (the cache's full-precision residual and page-summary
  // index, of which summary_bytes), counted in L1.
  void set_external_bytes(std::size_t bytes, std::size_t summary_bytes = 0) {
    external_bytes_ = bytes;
    stats_.summary_index_bytes = std::max<std::uint64_t>(stats_.summary_index_bytes, summary_bytes);
  }
  // The phase of the steps from now on (MemoryStats' figures by phase).
  void set_step_kind(StepKind kind) { step_kind_ = kind; }
  // The pages this attention call loaded on demand so far (cleared when the step is released).
  const std::vector<PageId>& step_demand_loads() const { return step_demand_; }
  // The owner's verdict on this step's demand loads: how many no earlier query could predict.
  void count_unpredictable(std::uint64_t loads) {
    if (step_kind_ == StepKind::Decode) stats_.later_unpredictable_loads += loads;
  }
  // The owner's cross-layer prediction at a decode step: what one layer took up, how much of it
  // the next layer read, and how many pages it predicted for the next layer.
  void count_next_layer(std::uint64_t offered, std::uint64_t read, std::uint64_t predicted) {
    stats_.next_layer_offered += offered;
    stats_.next_layer_read += read;
    stats_.next_layer_predicted += predicted;
  }

  // One step: make every page resident, held until end_step(); out[i] is ids[i]'s frame.
  // Throws InputError (naming the segment and page) when an L2 page cannot be read intact.
  void acquire(const std::vector<PageId>& ids, std::vector<const std::byte*>& out);
  // Releases what acquire() holds without ending the step (a one-off read).
  void release_acquired();
  // Accounts the step's L0 staging of `bytes` (staged bytes, batches of half of L0, peak).
  void stage_l0(std::uint64_t bytes);
  // What pressure relief leaves to the pool's owner (pressure_controller.h): danger was just
  // entered, so a smaller sparse budget is wanted (the owner passes it up: KVCache's
  // CacheOutcome; the budget's change is its one event); and, when `requantize`, the long-tail pages
  // to requantize (begin_requantize()/finish_requantize()), after which the owner calls
  // finish_relief() with how many it requantized (possibly none).
  struct Relief {
    bool tighten_budget = false;
    bool requantize = false;
    std::vector<PageId> pages;
  };

  // A step ends in two halves, so that the owner applies the relief before prefetch fills the
  // room left: release_step() releases the step's pages, marks the predicted pages (most likely
  // first) to be demoted last for the next `horizon` steps and relieves pressure;
  // finish_step() prefetches the predicted pages that are in L2 into the L1 room above the
  // warning watermark and closes the step's sample.
  Relief release_step(const std::vector<PageId>& predicted, std::uint64_t horizon = 1);
  void finish_step(const std::vector<PageId>& predicted);
  // Both, for an owner with nothing to apply: a budget request goes unanswered and a
  // requantization plan is finished with none done.
  void end_step(const std::vector<PageId>& predicted, std::uint64_t horizon = 1);
  // Between steps (the end of a prefill): the predicted pages are demoted last for the next
  // `horizon` steps and prefetched like finish_step() does, without ending a step.
  void advise(const std::vector<PageId>& predicted, std::uint64_t horizon);
  // Pages predicted to be read within the next `horizon` steps: demoted last and kept by the
  // read cache until then (a later deadline already set stays).
  void mark_predicted(const std::vector<PageId>& pages, std::uint64_t horizon);
  std::uint64_t step() const { return step_; }

  // Runs the pressure controller now (the cache calls it after sealing pages) and applies what
  // the pool can: levels, events and demotion.
  Relief relieve_pressure();
  // After the owner applied a Relief with `requantize`: counts the pages, then safe again or
  // an overflow episode.
  void finish_relief(std::size_t requantized);
  // The cache's report of a decode step's selection churn (MemoryConfig::selection_shift): a
  // SelectionShift event with this step's demand loads, when new_pages reach the threshold.
  void selection_churn(int layer, std::uint64_t new_pages, std::uint64_t kept_pages);
  // Waits until the migrator has written every full batch (tests, benchmarks).
  void drain();
  // Counters from zero and peaks at today's levels (the pages, their tiers and the retention
  // order stay): the figures from here on leave out a warm-up pass. Call between steps.
  void reset_counters();

  MemoryStats stats() const;
  // The L2 traffic so far (cheap: no lock, no copy of the stats' strings).
  TrafficCounters traffic() const;
  bool l2_enabled() const { return store_ != nullptr; }
  const MemoryConfig& config() const { return config_; }
  // Events and the per-step samples since the last call.
  std::vector<MemoryEvent> take_events();
  std::vector<MemorySample> take_samples();
  // Danger's second remedy: the owner declares the byte size of a long-tail (INT2) page, and
  // relief then plans pages for it to requantize (Relief::pages).
  void set_long_tail(std::size_t small_page_bytes) {
    frames_.set_class_bytes(FrameClass::LongTail, small_page_bytes);
    long_tail_enabled_ = true;
  }
  // The byte size of an image's page in the visual block's formats (allocate(FrameClass::Visual)).
  void set_visual_bytes(std::size_t bytes) { frames_.set_class_bytes(FrameClass::Visual, bytes); }
  // A resident full-size page gets a long-tail frame (returned, to fill); its old bytes stay
  // readable at requantize_source() until finish_requantize(), which frees them and drops a
  // stale L2 copy. The page's version is odd in between.
  std::byte* begin_requantize(PageId id);
  const std::byte* requantize_source() const;
  void finish_requantize(PageId id);
  bool long_tail(PageId id) const { return frame_class(id) == FrameClass::LongTail; }
  FrameClass frame_class(PageId id) const { return residence(id).cls; }
  // A filled page is sealed for good (an image's page, written once at prefill): frame() and
  // begin_requantize() refuse it from now on (InputError naming the page) and danger's long tail
  // never plans it, and while a coming step is predicted to read it, demotion takes it after
  // every other page (predicted text pages included) and the read cache never drops it. Its
  // bytes still move between tiers, verified like any page's. Until released.
  void seal_read_only(PageId id);
  // Pages whose home is L2 (an image's with visual.tier l2): each one with no L2 copy yet that
  // is resident and neither pinned, held nor predicted for a coming step is written to L2 now and
  // leaves L1; later loads bring it back as a clean copy, which the read cache drops at no cost.
  // Without L2, or once L2 stopped taking writes, nothing moves. Returns how many left L1.
  std::size_t write_out(const std::vector<PageId>& ids);
  bool read_only(PageId id) const;
  std::size_t read_only_pages() const { return read_only_live_; }

  // For tests: the version of a page's frame (odd while the migrator writes it).
  std::uint32_t version(PageId id) const;
  bool resident(PageId id) const;
  bool pinned(PageId id) const;

 private:
  struct Page;

  Page& at(PageId id);
  void unused_prefetch(const Page& page);  // a prefetched page goes unread
  // Sets a page's frame and frame class, in its record and in residence_.
  void place(PageId id, std::byte* frame, FrameClass cls);
  const Page& at(PageId id) const;
  bool held(PageId id) const;
  static std::string read_only_reason(PageId id);
  // L1 room a frame of the class is reckoned at: a full page, or the class's size where larger
  // (an image page in a wider format).
  std::size_t room_bytes(FrameClass cls) const;
  std::byte* take_frame(FrameClass cls);
  void give_frame(std::byte* frame, FrameClass cls);
  std::vector<PageId> plan_long_tail(std::size_t max_pages);
  std::uint64_t l1_used() const;
  // Loads the predicted pages that are in L2, most likely first, into the L1 room above the
  // warning watermark; the read cache (clean copies not predicted) gives up room for them.
  void prefetch(const std::vector<PageId>& predicted);
  // Drops clean L1 copies that no step is predicted to read, lowest retention first, until
  // `bytes` are free or none is left. Returns the bytes freed.
  std::size_t drop_read_cache(std::size_t bytes);
  void start_load(PageId id, Migrator::LoadKind kind);
  // The migrator's lock over the page records' load states; none without L2 (no migrator).
  std::unique_lock<std::mutex> lock_loads();
  void demote(const std::vector<PageId>& plan);
  // The store failed: demotion of dirty pages stops, and the pages only its unwritten batches
  // held come back to L1 (recall_unwritten), at once or, while a step holds pages, once the
  // step lets them go.
  void l2_failed();
  void recall_unwritten();
  // spare_predicted: pages a coming step is predicted to read are not candidates.
  std::size_t demote_bytes(std::size_t bytes_to_free, bool spare_predicted = false);
  void set_level(PressureLevel level, const std::string& reason);
  PressureState pressure_state() const;
  // Sets the plan's level and closes or opens an overflow episode as it says.
  void apply_level(const PressurePlan& plan);
  void event(MemoryEvent::Kind kind, const std::string& reason, std::uint64_t pages = 0);

  std::size_t page_bytes_;
  MemoryConfig config_;
  std::unique_ptr<L2Store> store_;

  // L1 frames, carved from slabs as needed (the arena never exceeds its peak).
  FrameArena frames_;
  std::byte* requantize_source_ = nullptr;
  bool long_tail_enabled_ = false;  // set_long_tail() was called
  std::size_t external_bytes_ = 0;

  std::deque<Page> pages_;  // stable addresses: the migrator holds pointers
  std::vector<Residence> residence_;  // pages_[id].frame and .cls, one dense entry per id
  std::vector<PageId> free_ids_;
  std::size_t live_ = 0, peak_live_ = 0;
  std::size_t read_only_resident_ = 0;  // read-only pages with an L1 frame
  std::size_t read_only_live_ = 0;      // read-only pages
  std::size_t pinned_pages_ = 0;
  std::uint64_t step_ = 0;
  // Per id, dense like residence_ (a decode step touches every page it reads): acquire() holds
  // pages for a step by stamping held_by with hold_, and release_acquired() moves hold_ on,
  // which releases them all at once; last_used ranks pages for demotion.
  struct Use {
    std::uint64_t held_by = 0;
    std::uint64_t last_used = 0;
  };
  std::vector<Use> use_;
  std::vector<float> importance_;  // per id, dense (set_importance)
  std::uint64_t hold_ = 1;
  bool holding_ = false;
  PressureLevel level_ = PressureLevel::Safe;
  bool l2_stopped_ = false;   // failed or full: no more demotion of dirty pages
  bool failure_handled_ = false;  // the store's failure reported and its unwritten pages recalled
  bool recall_pending_ = false;   // the store failed while a step held pages
  bool overflowing_ = false;  // an Overflow event is reported once per episode
  bool machine_low_ = false;  // MemAvailable below its floor at the last check
  std::uint64_t last_sample_ns_ = 0;  // when the last step's sample was closed
  std::uint64_t last_read_ios_ = 0;   // the store's read I/Os when the last sample was closed
  StepKind step_kind_ = StepKind::Prefill;
  std::vector<PageId> step_demand_;  // this call's demand loads
  MemoryStats stats_;
  MemorySample sample_;
  std::vector<MemoryEvent> events_;
  std::vector<MemorySample> samples_;

  // Loads (demand first), then the store's writes and compaction; with L2 only. Last: stopped
  // before the page records and the store it points into go.
  std::unique_ptr<Migrator> migrator_;
};

}  // namespace kv
