#include "memory/pressure_controller.h"

#include <cmath>

namespace kv {

namespace {

// Whole bytes, so that "free > 15%" is exact at the boundary. A machine low on memory counts
// as no free L1.
bool safe(const PressureState& s, const PressureWatermarks& m) {
  const auto warning_free_bytes = static_cast<std::int64_t>(std::llround(static_cast<double>(s.l1_bytes) * m.warning_free));
  return !s.machine_low && static_cast<std::int64_t>(s.l1_bytes) - static_cast<std::int64_t>(s.l1_used) > warning_free_bytes;
}

std::uint64_t target_used(const PressureState& s, const PressureWatermarks& m) {
  return static_cast<std::uint64_t>(std::llround(static_cast<double>(s.l1_bytes) * (1.0 - m.target_free)));
}

// Why demotion cannot keep up.
std::string danger_reason(const PressureState& s, const PressureWatermarks& m) {
  std::string reason = !s.has_l2 ? "no L2 tier" : s.l2_stopped ? "L2 full or failing" : "pinned and in-use pages fill L1";
  if (static_cast<double>(s.pinned_bytes) >= m.danger_pinned * static_cast<double>(s.l1_bytes)) {
    reason = "pinned pages alone near the L1 cap";
  }
  if (s.machine_low) reason = "MemAvailable below mem_available_floor_bytes";
  return reason;
}

void to_safe(PressurePlan& plan, const PressureState& s, const char* reason) {
  if (s.level != PressureLevel::Safe) {
    plan.level = PressureLevel::Safe;
    plan.reason = reason;
  }
  plan.done = true;
}

void check_overflow(PressurePlan& plan, const PressureState& s, const std::string& reason) {
  plan.overflowing = s.l1_used > s.l1_bytes;
  plan.overflow_opened = plan.overflowing && !s.overflowing;
  if (plan.overflow_opened) plan.overflow_reason = "L1 holds more than l1_bytes: " + reason;
  plan.done = true;
}

}  // namespace

PressurePlan plan_pressure(const PressureState& state, const PressureWatermarks& marks, PressureStage stage) {
  PressurePlan plan;
  plan.overflowing = state.overflowing;
  const std::uint64_t target = target_used(state, marks);
  switch (stage) {
    case PressureStage::Start:
      if (safe(state, marks)) {
        to_safe(plan, state, "L1 free above the warning watermark");
        return plan;
      }
      if (state.level == PressureLevel::Safe) {
        plan.level = PressureLevel::Warning;
        plan.reason = "L1 free at or below the warning watermark";
      }
      if (state.l1_used > target) plan.demote_bytes = state.l1_used - target;
      return plan;
    case PressureStage::AfterDemotion: {
      if (safe(state, marks)) {
        to_safe(plan, state, "demotion brought L1 free above the warning watermark");
        return plan;
      }
      const std::string reason = danger_reason(state, marks);
      if (state.level != PressureLevel::Danger) {
        plan.level = PressureLevel::Danger;
        plan.reason = reason;
        plan.tighten_budget = true;
      }
      if (state.long_tail && state.small_page_bytes < state.page_bytes && state.l1_used > target) {
        const std::uint64_t saved = state.page_bytes - state.small_page_bytes;
        plan.requantize_pages = (state.l1_used - target + saved - 1) / saved;
        return plan;  // AfterRequantization decides the rest
      }
      check_overflow(plan, state, reason);
      return plan;
    }
    case PressureStage::AfterRequantization:
      if (safe(state, marks)) {
        to_safe(plan, state, "requantization brought L1 free above the warning watermark");
        plan.overflowing = false;
        return plan;
      }
      check_overflow(plan, state, danger_reason(state, marks));
      return plan;
  }
  return plan;
}

}  // namespace kv
