// TieredPool's pressure: the end of a step, the levels and their events, relief as the
// pressure controller plans it (pressure_controller.h) and danger's long tail.
#include <algorithm>
#include <cstdio>
#include <utility>

#include "memory/placement.h"
#include "memory/tiered_pool.h"
#include "memory/tiered_pool_page.h"
#include "runtime/clock.h"
#include "runtime/error.h"

namespace kv {

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

std::size_t TieredPool::room_pages() const {
  if (config_.l1_bytes == 0) return SIZE_MAX;
  const auto ceiling = static_cast<std::size_t>(static_cast<double>(config_.l1_bytes) * (1.0 - config_.warning_free));
  return ceiling > pinned_bytes() ? (ceiling - pinned_bytes()) / page_bytes_ : 0;
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
  events_.back().shift = {layer, new_pages, kept_pages};
}

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

}  // namespace kv
