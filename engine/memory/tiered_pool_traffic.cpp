// TieredPool's L2 traffic: loads on demand and by prefetch, the read cache, demotion to L2 and
// what happens when the store fails. The decisions stay the owner thread's; the migrator only
// performs the reads and writes (tiered_pool.h).
#include <algorithm>
#include <utility>

#include "memory/placement.h"
#include "memory/tiered_pool.h"
#include "memory/tiered_pool_page.h"
#include "runtime/clock.h"
#include "runtime/error.h"

namespace kv {

void TieredPool::unused_prefetch(const Page& page) {
  ++stats_.prefetch_unused;
  ++sample_.prefetch_unused;
  stats_.prefetch_unused_bytes += class_bytes(page.cls);
}

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

void TieredPool::drain() {
  if (store_ != nullptr) store_->write_pending(true);
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

}  // namespace kv
