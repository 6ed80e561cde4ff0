// TieredPool: its pages, their frames and residence, stats. Its L2 traffic (loads, prefetch,
// demotion) is in tiered_pool_traffic.cpp, the end of a step and pressure relief in
// tiered_pool_pressure.cpp; the page record all three share in tiered_pool_page.h.
#include "memory/tiered_pool.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <optional>
#include <utility>

#include "memory/placement.h"
#include "memory/tiered_pool_page.h"
#include "runtime/clock.h"
#include "runtime/error.h"

namespace kv {

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

bool TieredPool::held(PageId id) const { return use_[id].held_by == hold_; }

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
