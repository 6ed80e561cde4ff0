#include "memory/tiered_pool.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <optional>
#include <utility>

#include "memory/placement.h"
#include "runtime/clock.h"
#include "runtime/error.h"

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

void validate_memory_config(const MemoryConfig& config) {
  const std::string where = "memory config";
  if (config.l0_bytes < 2 * 4096) throw InputError(where, "l0_bytes", "must be at least 8 KiB (two staging halves)");
  if (!config.l2.dir.empty() && config.l1_bytes == 0) {
    throw InputError(where, "l1_bytes", "must be set (> 0) when an L2 directory is given: L2 holds what L1 cannot");
  }
  if (config.prefetch_lookahead < 0) throw InputError(where, "prefetch_lookahead", "must be >= 0");
  if (!(config.warning_free > 0.0 && config.warning_free < 1.0)) throw InputError(where, "warning_free", "must be in (0, 1)");
  if (!(config.target_free > config.warning_free && config.target_free < 1.0)) {
    throw InputError(where, "target_free", "must be in (warning_free, 1)");
  }
  if (!(config.danger_pinned > 0.0 && config.danger_pinned <= 1.0)) throw InputError(where, "danger_pinned", "must be in (0, 1]");
  if (config.demote_batch_pages < 1) throw InputError(where, "demote_batch_pages", "must be >= 1");
  if (config.pin_sink_tokens < 0) throw InputError(where, "pin_sink_tokens", "must be >= 0");
  if (config.pin_window_tokens < 0) throw InputError(where, "pin_window_tokens", "must be >= 0");
  if (!(config.importance_decay > 0.0f && config.importance_decay <= 1.0f)) {
    throw InputError(where, "importance_decay", "must be in (0, 1]");
  }
  if (!(config.selection_shift > 0.0 && config.selection_shift <= 1.0)) throw InputError(where, "selection_shift", "must be in (0, 1]");
  if (!config.l2.dir.empty()) validate_l2_config(config.l2);
}

double MemoryStats::prefetch_hit_rate() const {
  const std::uint64_t needed = prefetch_hits + demand_loads;
  return needed > 0 ? static_cast<double>(prefetch_hits) / static_cast<double>(needed) : 1.0;
}
double MemoryStats::prefetch_hit_rate_after_first() const {
  const std::uint64_t needed = later_prefetch_hits + later_demand_loads;
  return needed > 0 ? static_cast<double>(later_prefetch_hits) / static_cast<double>(needed) : 1.0;
}
double MemoryStats::prefetch_hit_rate_predictable() const {
  const std::uint64_t needed = later_prefetch_hits + later_demand_loads - later_unpredictable_loads;
  return needed > 0 ? static_cast<double>(later_prefetch_hits) / static_cast<double>(needed) : 1.0;
}
double MemoryStats::l1_cache_hit_rate() const {
  return cold_reads > 0 ? static_cast<double>(cold_hits) / static_cast<double>(cold_reads) : 1.0;
}
double MemoryStats::l1_cache_hit_rate_decode() const {
  return decode_cold_reads > 0 ? static_cast<double>(decode_cold_hits) / static_cast<double>(decode_cold_reads) : 1.0;
}
double MemoryStats::write_amplification() const {
  return l2_flushed_page_bytes > 0 ? static_cast<double>(l2_flushed_device_bytes) / static_cast<double>(l2_flushed_page_bytes)
                                   : 0.0;
}
double MemoryStats::swap_in_gb_per_s() const {
  return l2_read_ns > 0 ? static_cast<double>(swap_in_bytes) / static_cast<double>(l2_read_ns) : 0.0;
}
double MemoryStats::swap_out_gb_per_s() const {
  return l2_write_ns > 0 ? static_cast<double>(l2_bytes_written) / static_cast<double>(l2_write_ns) : 0.0;
}

TieredPool::TieredPool(std::size_t page_bytes, std::size_t alignment, const MemoryConfig& config)
    : page_bytes_(page_bytes), config_((validate_memory_config(config), config)), frames_(page_bytes, alignment) {
  KV_ASSERT(page_bytes > 0 && page_bytes % alignment == 0, "page size must be a multiple of the alignment");
  if (!config_.l2.dir.empty()) {
    store_ = std::make_unique<L2Store>(config_.l2);
    L2Store* store = store_.get();
    migrator_ = std::make_unique<Migrator>(
        MigratorIo{[store](L2Slot slot, std::byte* frame) { store->read(slot, frame); },
                   [store] {
                     if (store->write_pending(false)) store->compact();
                   },
                   [store](const std::vector<L2Slot>& slots, const std::vector<std::byte*>& frames) { return store->read_run(slots, frames); }},
        config_.l2.synchronous ? 0 : config_.l2.queue_depth, config_.l2.max_read_bytes);
    // Synchronous: no writer thread to wake; demote() writes the batches it filled.
    if (!config_.l2.synchronous) store_->set_writer_wakeup([migrator = migrator_.get()] { migrator->writes_ready(); });
  }
  stats_.l1_capacity_bytes = config_.l1_bytes;
}

TieredPool::~TieredPool() {
  if (migrator_ != nullptr) migrator_->stop();
}

TieredPool::Page& TieredPool::at(PageId id) {
  KV_ASSERT(id < pages_.size(), "unknown page id");
  return pages_[id];
}
const TieredPool::Page& TieredPool::at(PageId id) const {
  KV_ASSERT(id < pages_.size(), "unknown page id");
  return pages_[id];
}

std::uint64_t TieredPool::l1_used() const { return frames_.used_bytes() + external_bytes_; }

std::size_t TieredPool::room_bytes(FrameClass cls) const { return std::max(page_bytes_, class_bytes(cls)); }

std::byte* TieredPool::take_frame(FrameClass cls) {
  std::byte* frame = frames_.take(cls);
  stats_.peak_l1_bytes = std::max(stats_.peak_l1_bytes, l1_used());
  return frame;
}

void TieredPool::give_frame(std::byte* frame, FrameClass cls) { frames_.give(frame, cls); }

PageId TieredPool::allocate(FrameClass cls) {
  PageId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<PageId>(pages_.size());
    pages_.emplace_back();
  }
  if (residence_.size() < pages_.size()) {
    residence_.resize(pages_.size());
    use_.resize(pages_.size());
    importance_.resize(pages_.size());
  }
  Page& page = pages_[id];
  place(id, take_frame(cls), cls);
  page.refcount = 1;
  use_[id] = {0, step_};
  ++live_;
  peak_live_ = std::max(peak_live_, live_);
  return id;
}

void TieredPool::make_room(std::size_t bytes) {
  if (recall_pending_) recall_unwritten();
  if (store_ == nullptr || config_.l1_bytes == 0 || l1_used() + bytes <= config_.l1_bytes) return;
  demote_bytes(l1_used() + bytes - config_.l1_bytes);
}

void TieredPool::retain(PageId id) {
  KV_ASSERT(at(id).refcount > 0, "retain of a free page");
  ++at(id).refcount;
}

void TieredPool::release(PageId id) {
  Page& page = at(id);
  KV_ASSERT(page.refcount > 0, "release of a free page");
  if (--page.refcount > 0) return;
  KV_ASSERT(!held(id), "release of a page the current step holds");
  if (migrator_ != nullptr) migrator_->settle(page.load);
  if (page.prefetched) unused_prefetch(page);
  if (page.frame != nullptr) give_frame(page.frame, page.cls);
  if (page.slot != kNoSlot) store_->release(page.slot);
  place(id, nullptr, FrameClass::Page);
  pinned_pages_ -= page.pins > 0 ? 1 : 0;
  page.slot = kNoSlot;
  page.pins = 0;
  importance_[id] = 0.0f;
  page.prefetched = false;
  read_only_live_ -= page.read_only ? 1 : 0;
  page.read_only = false;
  page.predicted_at = 0;
  page.version.fetch_add(2);  // a reused id never matches a reader's old version
  free_ids_.push_back(id);
  --live_;
}

void TieredPool::unused_prefetch(const Page& page) {
  ++stats_.prefetch_unused;
  ++sample_.prefetch_unused;
  stats_.prefetch_unused_bytes += class_bytes(page.cls);
}

void TieredPool::place(PageId id, std::byte* frame, FrameClass cls) {
  Page& page = at(id);
  if (page.read_only && (frame != nullptr) != (page.frame != nullptr)) {
    if (frame != nullptr) {
      ++read_only_resident_;
    } else {
      --read_only_resident_;
    }
  }
  page.frame = frame;
  page.cls = cls;
  residence_[id] = {frame, cls};
}

std::byte* TieredPool::frame(PageId id) {
  Page& page = at(id);
  if (page.read_only) throw InputError("TieredPool::frame", "page", read_only_reason(id));
  return page.frame;
}

void TieredPool::seal_read_only(PageId id) {
  Page& page = at(id);
  KV_ASSERT(page.refcount > 0, "read-only sealing of a free page");
  if (page.read_only) return;
  if (page.frame != nullptr) ++read_only_resident_;
  ++read_only_live_;
  page.read_only = true;
}

bool TieredPool::read_only(PageId id) const { return at(id).read_only; }

std::size_t TieredPool::write_out(const std::vector<PageId>& ids) {
  if (store_ == nullptr) return 0;
  if (recall_pending_) recall_unwritten();
  if (l2_stopped_) return 0;
  std::vector<PageId> plan;
  for (PageId id : ids) {
    const Page& page = at(id);
    // A page with an L2 copy is home already (an L1 copy is the read cache's), and one a coming
    // step is predicted to read stays like any predicted page.
    if (page.frame == nullptr || page.slot != kNoSlot || page.pins > 0 || held(id) || page.predicted_at > step_) continue;
    plan.push_back(id);
  }
  std::sort(plan.begin(), plan.end());  // sealing order: read together later, they lie together
  demote(plan);
  std::size_t left = 0;
  for (PageId id : plan) left += at(id).frame == nullptr ? 1 : 0;
  return left;
}

std::string TieredPool::read_only_reason(PageId id) {
  return "page " + std::to_string(id) + " is sealed read-only (an image's page): it is never written again";
}
const std::byte* TieredPool::frame(PageId id) const { return residence(id).frame; }

void TieredPool::pin(PageId id) {
  if (at(id).pins++ == 0) ++pinned_pages_;
}
void TieredPool::unpin(PageId id) {
  KV_ASSERT(at(id).pins > 0, "unpin of an unpinned page");
  if (--at(id).pins == 0) --pinned_pages_;
}
bool TieredPool::pinned(PageId id) const { return at(id).pins > 0; }
std::uint32_t TieredPool::version(PageId id) const { return at(id).version.load(); }
bool TieredPool::resident(PageId id) const { return at(id).frame != nullptr; }

std::unique_lock<std::mutex> TieredPool::lock_loads() {
  return migrator_ != nullptr ? migrator_->lock() : std::unique_lock<std::mutex>();
}

void TieredPool::start_load(PageId id, Migrator::LoadKind kind) {
  const bool demand = kind == Migrator::LoadKind::Demand;
  Page& page = at(id);
  if (demand && config_.l1_bytes > 0 && l1_used() + class_bytes(page.cls) > config_.l1_bytes) {
    demote_bytes(room_bytes(page.cls) * config_.demote_batch_pages);
  }
  place(id, take_frame(page.cls), page.cls);
  const std::uint64_t bytes = store_->slot_bytes(page.slot);
  stats_.swap_in_bytes += bytes;
  (demand ? stats_.demand_bytes : stats_.prefetch_bytes) += bytes;
  // Still in the write batch being filled, by the owner's own count of demoted bytes: a copy
  // from memory. Deterministic (the flushes of the writer thread are not).
  if (stats_.swap_out_bytes - page.demoted_at < config_.l2.batch_bytes) ++(demand ? stats_.buffered_demand : stats_.buffered_prefetch);
  sample_.swap_in_bytes += bytes;
  migrator_->enqueue({&page.load, &page.version, page.slot, page.frame, store_->location(page.slot)}, kind);
}

void TieredPool::acquire(const std::vector<PageId>& ids, std::vector<const std::byte*>& out) {
  KV_ASSERT(!holding_, "acquire twice in one step");
  holding_ = !ids.empty();
  if (store_ == nullptr) {
    // Without L2 every page is resident and nothing loads or rewrites a frame during a step:
    // the dense arrays alone, no page record (a record per page is a cache miss per page).
    out.resize(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const PageId id = ids[i];
      KV_ASSERT(id < use_.size() && residence_[id].frame != nullptr, "acquire of a page without a frame");
      use_[id] = {hold_, step_};
      out[i] = residence_[id].frame;
    }
    stats_.pages_read += ids.size();
    return;
  }
  for (PageId id : ids) {
    KV_ASSERT(id < use_.size(), "unknown page id");
    use_[id].held_by = hold_;
  }
  stats_.pages_read += ids.size();
  const bool first = step_kind_ == StepKind::FirstDecode, later = step_kind_ == StepKind::Decode;
  if (first) stats_.first_step_pages += ids.size();
  std::vector<PageId> waiting;
  const std::uint64_t device_loads_before = stats_.demand_loads - stats_.buffered_demand;
  for (PageId id : ids) {
    Page& page = at(id);
    use_[id].last_used = step_;
    const bool decoding = first || later;
    if (page.slot != kNoSlot) {
      ++stats_.cold_reads;
      if (decoding) ++stats_.decode_cold_reads;
    }
    if (page.frame != nullptr) {
      if (page.slot != kNoSlot) {
        ++stats_.cold_hits;
        if (decoding) ++stats_.decode_cold_hits;
      }
      if (page.prefetched) {
        ++stats_.prefetch_hits;
        ++sample_.prefetch_hits;
        if (later) ++stats_.later_prefetch_hits;
      }
      page.prefetched = false;
      if (store_ != nullptr) waiting.push_back(id);  // a prefetch may still be writing the frame
      continue;
    }
    ++stats_.demand_loads;
    ++sample_.demand_loads;
    if (first) ++stats_.first_step_demand_loads;
    if (later) ++stats_.later_demand_loads;
    step_demand_.push_back(id);
    start_load(id, Migrator::LoadKind::Demand);
    waiting.push_back(id);
  }
  if (stats_.demand_loads - stats_.buffered_demand > device_loads_before) ++stats_.demand_waits;
  out.resize(ids.size());
  for (PageId id : waiting) {
    Page& page = at(id);
    if (const std::optional<std::uint64_t> waited = migrator_->wait(page.load)) {
      ++stats_.pages_waited;
      stats_.dma_wait_ns += *waited;
      sample_.dma_wait_ns += *waited;
      if (first) stats_.first_step_dma_wait_ns += *waited;
      if (later) stats_.later_dma_wait_ns += *waited;
    }
    const std::string error = migrator_->consume(page.load);
    if (!error.empty()) {
      // The page has no intact copy: give back its frame so a retry reloads it, then report.
      give_frame(page.frame, page.cls);
      place(id, nullptr, page.cls);
      release_acquired();
      throw InputError(store_->path(), "l2 read", error);
    }
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const Page& page = at(ids[i]);
    KV_ASSERT((page.version.load(std::memory_order_acquire) & 1u) == 0, "a page under rewrite was acquired");
    out[i] = page.frame;
  }
}

void TieredPool::stage_l0(std::uint64_t bytes) {
  const std::uint64_t half = config_.l0_bytes / 2;
  stats_.l0_staged_bytes += bytes;
  stats_.l0_batches += (bytes + half - 1) / half;
  stats_.peak_l0_bytes = std::max<std::uint64_t>(stats_.peak_l0_bytes, std::min<std::uint64_t>(bytes, config_.l0_bytes));
  sample_.l0_bytes += bytes;
}

void TieredPool::release_acquired() {
  // Every page of the hold is released at once: none holds the next hold's number.
  holding_ = false;
  ++hold_;
}

bool TieredPool::held(PageId id) const { return use_[id].held_by == hold_; }

TrafficCounters operator-(const TrafficCounters& later, const TrafficCounters& earlier) {
  TrafficCounters d;
  d.swap_in_bytes = later.swap_in_bytes - earlier.swap_in_bytes;
  d.swap_out_bytes = later.swap_out_bytes - earlier.swap_out_bytes;
  d.demand_loads = later.demand_loads - earlier.demand_loads;
  d.demand_bytes = later.demand_bytes - earlier.demand_bytes;
  d.prefetch_loads = later.prefetch_loads - earlier.prefetch_loads;
  d.prefetch_bytes = later.prefetch_bytes - earlier.prefetch_bytes;
  d.buffered_demand = later.buffered_demand - earlier.buffered_demand;
  d.demand_waits = later.demand_waits - earlier.demand_waits;
  d.buffered_prefetch = later.buffered_prefetch - earlier.buffered_prefetch;
  d.demotions = later.demotions - earlier.demotions;
  return d;
}

TrafficCounters TieredPool::traffic() const {
  TrafficCounters t;
  t.swap_in_bytes = stats_.swap_in_bytes;
  t.swap_out_bytes = stats_.swap_out_bytes;
  t.demand_loads = stats_.demand_loads;
  t.demand_bytes = stats_.demand_bytes;
  t.prefetch_loads = stats_.prefetch_loads;
  t.prefetch_bytes = stats_.prefetch_bytes;
  t.buffered_demand = stats_.buffered_demand;
  t.demand_waits = stats_.demand_waits;
  t.buffered_prefetch = stats_.buffered_prefetch;
  t.demotions = stats_.demotions;
  return t;
}

TieredPool::Relief TieredPool::release_step(const std::vector<PageId>& predicted, std::uint64_t horizon) {
  release_acquired();
  // Predicted pages are demoted last; finish_step() then fills the room left above the warning
  // watermark with the predicted pages that are in L2, most likely first.
  mark_predicted(predicted, horizon);
  return relieve_pressure();
}

void TieredPool::end_step(const std::vector<PageId>& predicted, std::uint64_t horizon) {
  if (release_step(predicted, horizon).requantize) finish_relief(0);
  finish_step(predicted);
}

void TieredPool::prefetch(const std::vector<PageId>& predicted) {
  if (store_ == nullptr || config_.prefetch_lookahead <= 0 || config_.l1_bytes == 0) return;
  const auto ceiling = static_cast<std::uint64_t>(static_cast<double>(config_.l1_bytes) * (1.0 - config_.warning_free));
  std::size_t missing = 0;
  for (PageId id : predicted) {
    const Page& page = at(id);
    if (page.frame == nullptr && page.slot != kNoSlot) missing += room_bytes(page.cls);
  }
  if (missing == 0) return;
  if (l1_used() + missing > ceiling) drop_read_cache(l1_used() + missing - ceiling);
  for (PageId id : predicted) {
    Page& page = at(id);
    if (page.frame != nullptr || page.slot == kNoSlot) continue;
    if (l1_used() + room_bytes(page.cls) > ceiling) break;
    use_[id].last_used = step_;
    page.prefetched = true;
    ++stats_.prefetch_loads;
    start_load(id, Migrator::LoadKind::Prefetch);
  }
}

std::size_t TieredPool::drop_read_cache(std::size_t bytes) {
  std::vector<DemotionCandidate> candidates;
  for (PageId id = 0; id < pages_.size(); ++id) {
    if (residence_[id].frame == nullptr || held(id)) continue;
    const Page& page = pages_[id];
    if (page.pins > 0 || page.slot == kNoSlot || page.predicted_at > step_) continue;
    candidates.push_back({id, importance_[id], use_[id].last_used, true, class_bytes(page.cls), false});
  }
  const std::vector<PageId> plan = plan_demotion(std::move(candidates), step_, bytes, pages_.size());
  const std::uint64_t before = l1_used();
  demote(plan);  // clean copies: dropped, nothing written
  return before - l1_used();
}

std::size_t TieredPool::room_pages() const {
  if (config_.l1_bytes == 0) return SIZE_MAX;
  const auto ceiling = static_cast<std::size_t>(static_cast<double>(config_.l1_bytes) * (1.0 - config_.warning_free));
  return ceiling > pinned_bytes() ? (ceiling - pinned_bytes()) / page_bytes_ : 0;
}

std::size_t TieredPool::predicted_resident_bytes() const {
  std::size_t bytes = 0;
  for (PageId id = 0; id < pages_.size(); ++id) {
    if (residence_[id].frame != nullptr && pages_[id].predicted_at > step_ && pages_[id].pins == 0) bytes += class_bytes(residence_[id].cls);
  }
  return bytes;
}

void TieredPool::advise(const std::vector<PageId>& predicted, std::uint64_t horizon) {
  mark_predicted(predicted, horizon);
  prefetch(predicted);
}

void TieredPool::mark_predicted(const std::vector<PageId>& pages, std::uint64_t horizon) {
  // A shorter prediction (the next layer's) never cuts a longer one short.
  for (PageId id : pages) {
    Page& page = at(id);
    page.predicted_at = std::max(page.predicted_at, step_ + horizon);
  }
}

void TieredPool::finish_step(const std::vector<PageId>& predicted) {
  prefetch(predicted);
  step_demand_.clear();
  if (store_ != nullptr) {
    const std::uint64_t ios = store_->stats().read_ios;
    sample_.read_ios = ios - last_read_ios_;
    last_read_ios_ = ios;
  }
  if (step_kind_ != StepKind::Prefill) {
    ++stats_.decode_steps;
    stats_.read_only_resident_sum += read_only_resident_;
    stats_.decode_read_ios += sample_.read_ios;
  }
  const std::uint64_t now = monotonic_ns();
  sample_.step = step_;
  sample_.step_ns = last_sample_ns_ > 0 ? now - last_sample_ns_ : 0;
  last_sample_ns_ = now;
  sample_.l1_used_bytes = l1_used();
  sample_.l2_live_bytes = store_ != nullptr ? store_->stats().live_bytes : 0;
  sample_.level = level_;
  samples_.push_back(sample_);
  sample_ = MemorySample{};
  ++step_;
}

void TieredPool::event(MemoryEvent::Kind kind, const std::string& reason, std::uint64_t pages) {
  MemoryEvent e;
  e.kind = kind;
  e.step = step_;
  e.from = e.to = level_;
  e.l1_used_bytes = l1_used();
  e.l1_capacity_bytes = config_.l1_bytes;
  e.pinned_bytes = pinned_bytes();
  e.l2_live_bytes = store_ != nullptr ? store_->stats().live_bytes : 0;
  e.pages = pages;
  e.reason = reason;
  events_.push_back(std::move(e));
}

void TieredPool::set_level(PressureLevel level, const std::string& reason) {
  if (level == level_) return;
  const PressureLevel from = level_;
  event(MemoryEvent::Kind::Pressure, reason);
  events_.back().from = from;
  events_.back().to = level;
  level_ = level;
}

void TieredPool::demote(const std::vector<PageId>& plan) {
  for (PageId id : plan) {
    Page& page = at(id);
    if (page.slot == kNoSlot) {
      if (l2_stopped_) continue;
      const L2Slot slot = store_->append(page.frame, class_bytes(page.cls));
      if (slot == kNoSlot) {
        l2_stopped_ = true;
        if (!store_->failed()) event(MemoryEvent::Kind::L2Full, "the L2 store reached l2_max_bytes");
        continue;
      }
      page.slot = slot;
      page.demoted_at = stats_.swap_out_bytes;
      ++stats_.demotions;
      stats_.swap_out_bytes += class_bytes(page.cls);
      sample_.swap_out_bytes += class_bytes(page.cls);
    } else {
      ++stats_.drops;
    }
    if (page.prefetched) unused_prefetch(page);
    page.prefetched = false;
    migrator_->settle(page.load);
    give_frame(page.frame, page.cls);
    place(id, nullptr, page.cls);
  }
  if (config_.l2.synchronous && store_->has_pending_writes()) migrator_->writes_ready();
  if (store_->failed()) l2_failed();
}

void TieredPool::l2_failed() {
  l2_stopped_ = true;
  if (failure_handled_) return;
  if (holding_) {
    recall_pending_ = true;  // the step's pages must not move under it
    return;
  }
  recall_unwritten();
}

void TieredPool::recall_unwritten() {
  failure_handled_ = true;
  recall_pending_ = false;
  // Their batches will never reach the device, and the store's write buffers are not L1's to
  // borrow: kept there, these pages would be dropped and reloaded as if from L2 without ever
  // counting in L1, and what pressure the failure leaves would depend on when the writer
  // thread noticed it. Back in L1, every page without a device copy counts where it lives.
  const std::vector<L2Slot> unwritten = store_->unwritten_slots();
  std::vector<bool> is_unwritten;
  for (L2Slot slot : unwritten) {
    if (slot >= is_unwritten.size()) is_unwritten.resize(slot + 1, false);
    is_unwritten[slot] = true;
  }
  std::uint64_t recalled = 0;
  for (PageId id = 0; id < pages_.size(); ++id) {
    Page& page = pages_[id];
    if (page.refcount == 0 || page.slot == kNoSlot || page.slot >= is_unwritten.size() || !is_unwritten[page.slot]) continue;
    Migrator::Load::State before;
    {
      const auto lock = lock_loads();
      before = page.load.state;
    }
    migrator_->settle(page.load);  // a queued prefetch is cancelled: its frame holds nothing yet
    const bool intact = page.frame != nullptr && (before == Migrator::Load::State::None || before == Migrator::Load::State::Done);
    if (page.frame == nullptr) place(id, take_frame(page.cls), page.cls);
    if (!intact) {
      page.version.fetch_add(1, std::memory_order_acq_rel);  // odd while written
      store_->read(page.slot, page.frame);  // from the batch in memory
      page.version.fetch_add(1, std::memory_order_acq_rel);
    }
    page.prefetched = false;
    store_->release(page.slot);
    page.slot = kNoSlot;
    ++recalled;
  }
  stats_.peak_l1_bytes = std::max(stats_.peak_l1_bytes, l1_used());
  event(MemoryEvent::Kind::L2Failed,
        store_->failure() + (recalled > 0 ? "; " + std::to_string(recalled) + " pages its unwritten batches held came back to L1" : ""),
        recalled);
}

std::size_t TieredPool::demote_bytes(std::size_t bytes_to_free, bool spare_predicted) {
  if (store_ == nullptr) return 0;
  if (store_->failed()) l2_failed();
  // Every resident page that is not pinned or held, found through the dense arrays first (a page's
  // full record is touched only for a resident one). No lock: the migrator writes none of these
  // fields. A prefetch still in flight is a candidate like any other resident page (its state
  // depends on timing; the plan must not): demote() cancels or waits for it.
  std::vector<DemotionCandidate> candidates;
  for (PageId id = 0; id < pages_.size(); ++id) {
    if (residence_[id].frame == nullptr || held(id)) continue;  // free pages have no frame
    const Page& page = pages_[id];
    if (page.pins > 0) continue;
    if (l2_stopped_ && page.slot == kNoSlot) continue;  // only clean copies can go
    if (spare_predicted && page.predicted_at > step_) continue;
    candidates.push_back({id, importance_[id], use_[id].last_used, page.slot != kNoSlot, class_bytes(page.cls),
                          page.predicted_at > step_, page.read_only});
  }
  const std::vector<PageId> plan = plan_demotion(std::move(candidates), step_, bytes_to_free, pages_.size());
  const std::uint64_t before = l1_used();
  for (std::size_t i = 0; i < plan.size(); i += config_.demote_batch_pages) {
    const auto end = std::min(plan.size(), i + config_.demote_batch_pages);
    // In id order (sealing order: a head's pages in logical order), so that pages read together
    // later - a selected span - lie together on the device and load with one I/O.
    std::vector<PageId> batch(plan.begin() + static_cast<std::ptrdiff_t>(i), plan.begin() + static_cast<std::ptrdiff_t>(end));
    std::sort(batch.begin(), batch.end());
    demote(batch);
  }
  return before - l1_used();
}

std::uint64_t mem_available_bytes() {
  std::FILE* file = std::fopen("/proc/meminfo", "r");
  if (file == nullptr) return 0;
  char line[256];
  unsigned long long kib = 0;
  while (std::fgets(line, sizeof line, file) != nullptr) {
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) break;
  }
  std::fclose(file);
  return static_cast<std::uint64_t>(kib) * 1024;
}

PressureState TieredPool::pressure_state() const {
  PressureState s;
  s.l1_bytes = config_.l1_bytes;
  s.l1_used = l1_used();
  s.pinned_bytes = pinned_bytes();
  s.level = level_;
  s.machine_low = machine_low_;
  s.has_l2 = store_ != nullptr;
  s.l2_stopped = l2_stopped_;
  s.overflowing = overflowing_;
  s.long_tail = long_tail_enabled_;
  s.page_bytes = page_bytes_;
  s.small_page_bytes = long_tail_enabled_ ? class_bytes(FrameClass::LongTail) : 0;
  return s;
}

void TieredPool::apply_level(const PressurePlan& plan) {
  if (plan.level) set_level(*plan.level, plan.reason);
  if (!plan.done) return;
  if (plan.overflow_opened) event(MemoryEvent::Kind::Overflow, plan.overflow_reason);
  overflowing_ = plan.overflowing;
}

TieredPool::Relief TieredPool::relieve_pressure() {
  Relief relief;
  if (config_.l1_bytes == 0) return relief;
  if (config_.mem_available_floor_bytes > 0) {
    const bool low = mem_available_bytes() < config_.mem_available_floor_bytes;
    if (low && !machine_low_) event(MemoryEvent::Kind::Pressure, "MemAvailable below mem_available_floor_bytes");
    machine_low_ = low;
  }
  if (recall_pending_) recall_unwritten();
  const PressureWatermarks marks{config_.warning_free, config_.target_free, config_.danger_pinned};
  PressurePlan plan = plan_pressure(pressure_state(), marks, PressureStage::Start);
  apply_level(plan);
  if (plan.done) return relief;
  if (plan.demote_bytes > 0) {
    // Towards the target with pages no coming step is predicted to read; predicted pages go
    // only as far as leaving the warning level needs (else relief undoes the prefetch).
    demote_bytes(plan.demote_bytes, true);
    const auto ceiling = static_cast<std::uint64_t>(static_cast<double>(config_.l1_bytes) * (1.0 - config_.warning_free));
    if (l1_used() >= ceiling) demote_bytes(l1_used() - ceiling + page_bytes_);
  }
  plan = plan_pressure(pressure_state(), marks, PressureStage::AfterDemotion);
  apply_level(plan);
  relief.tighten_budget = plan.tighten_budget;
  if (plan.requantize_pages > 0) {
    // Second remedy: the long tail (lowest retention, unpinned, resident) is requantized to INT2.
    relief.requantize = true;
    relief.pages = plan_long_tail(plan.requantize_pages);
  }
  return relief;
}

void TieredPool::finish_relief(std::size_t requantized) {
  if (requantized > 0) {
    stats_.requantized_pages += requantized;
    event(MemoryEvent::Kind::Requantized, "danger: long-tail pages requantized to INT2", requantized);
  }
  const PressureWatermarks marks{config_.warning_free, config_.target_free, config_.danger_pinned};
  apply_level(plan_pressure(pressure_state(), marks, PressureStage::AfterRequantization));
}

void TieredPool::selection_churn(int layer, std::uint64_t new_pages, std::uint64_t kept_pages) {
  if (kept_pages == 0 || static_cast<double>(new_pages) < config_.selection_shift * static_cast<double>(kept_pages)) return;
  char percent[16];
  std::snprintf(percent, sizeof percent, "%.0f%%", 100.0 * static_cast<double>(new_pages) / static_cast<double>(kept_pages));
  event(MemoryEvent::Kind::SelectionShift,
        "layer " + std::to_string(layer) + ": " + std::to_string(new_pages) + " of " + std::to_string(kept_pages) +
            " kept pages new since the previous step (" + percent + "); " + std::to_string(step_demand_.size()) + " loaded on demand",
        step_demand_.size());
}

void TieredPool::budget_tightened() { event(MemoryEvent::Kind::BudgetTightened, "danger: sparse budget tightened"); }

std::vector<PageId> TieredPool::plan_long_tail(std::size_t max_pages) {
  std::vector<DemotionCandidate> candidates;
  {
    const auto lock = lock_loads();
    for (PageId id = 0; id < pages_.size(); ++id) {
      const Page& page = pages_[id];
      // Only the policy's pages: a long-tail page is requantized already, an image's is read-only.
      if (page.refcount != 1 || page.frame == nullptr || page.cls != FrameClass::Page || page.read_only || page.pins > 0 || held(id) ||
          page.load.in_flight()) {
        continue;
      }
      candidates.push_back({id, importance_[id], use_[id].last_used, false, 1, false});
    }
  }
  return plan_demotion(std::move(candidates), step_, max_pages, max_pages);
}

std::byte* TieredPool::begin_requantize(PageId id) {
  Page& page = at(id);
  if (page.read_only) throw InputError("TieredPool::begin_requantize", "page", read_only_reason(id));
  KV_ASSERT(page.frame != nullptr && page.cls == FrameClass::Page && !held(id), "requantization of a page that is not a resident full-size page");
  if (migrator_ != nullptr) migrator_->consume(page.load);  // a finished, unconsumed prefetch
  page.version.fetch_add(1, std::memory_order_acq_rel);  // odd while rewritten
  std::byte* old = page.frame;
  place(id, take_frame(FrameClass::LongTail), FrameClass::LongTail);
  requantize_source_ = old;
  return page.frame;
}

void TieredPool::finish_requantize(PageId id) {
  Page& page = at(id);
  give_frame(requantize_source_, FrameClass::Page);
  requantize_source_ = nullptr;
  if (page.slot != kNoSlot) {  // the L2 copy holds the old values
    store_->release(page.slot);
    page.slot = kNoSlot;
  }
  if (page.prefetched) unused_prefetch(page);
  page.prefetched = false;
  page.version.fetch_add(1, std::memory_order_acq_rel);
}

const std::byte* TieredPool::requantize_source() const { return requantize_source_; }

void TieredPool::drain() {
  if (store_ != nullptr) store_->write_pending(true);
}

void TieredPool::reset_counters() {
  KV_ASSERT(!holding_, "reset_counters() inside a step");
  drain();
  const auto lock = lock_loads();
  MemoryStats kept;
  kept.l1_capacity_bytes = stats_.l1_capacity_bytes;
  kept.peak_l1_bytes = l1_used();
  stats_ = kept;
  peak_live_ = live_;
  if (store_ != nullptr) store_->reset_counters();
  last_read_ios_ = 0;
  sample_ = MemorySample{};
  events_.clear();
  samples_.clear();
}

std::vector<MemoryEvent> TieredPool::take_events() { return std::exchange(events_, {}); }
std::vector<MemorySample> TieredPool::take_samples() { return std::exchange(samples_, {}); }

MemoryStats TieredPool::stats() const {
  MemoryStats s = stats_;
  s.l1_used_bytes = l1_used();
  s.pinned_bytes = pinned_bytes();
  s.frame_bytes = frames_.reserved_bytes();
  s.level = level_;
  s.l2_enabled = store_ != nullptr;
  if (store_ != nullptr) {
    const L2Stats l2 = store_->stats();
    s.l2_bytes_written = l2.device_bytes_written;
    s.l2_flushed_device_bytes = l2.flushed_device_bytes;
    s.l2_flushed_page_bytes = l2.flushed_page_bytes;
    s.l2_live_bytes = l2.live_bytes;
    s.l2_compaction_bytes = l2.page_bytes_relocated;
    s.peak_l2_bytes = l2.peak_disk_bytes;
    s.l2_read_ns = l2.read_ns;
    s.l2_read_ios = l2.read_ios;
    s.l2_device_bytes_read = l2.device_bytes_read;
    s.l2_write_ns = l2.write_ns;
    s.l2_failed = store_->failed();
    s.l2_mode = l2_mode_name(store_->mode());
    s.l2_fs_type = store_->fs_type();
    s.l2_on_ram = store_->on_ram();
  }
  return s;
}

}  // namespace kv
