// The pressure controller without a pool or threads: plain states in, plans out. Watermarks at
// their boundaries, demotion to target_free, danger's reasons and its one budget request,
// long-tail requantization sized to target_free, and overflow episodes opened once.
#include <catch2/catch.hpp>

#include "memory/pressure_controller.h"

using namespace kv;

namespace {

constexpr std::uint64_t kCap = 1000;
const PressureWatermarks kMarks{0.15, 0.25, 0.95};

PressureState at(std::uint64_t used, PressureLevel level = PressureLevel::Safe) {
  PressureState s;
  s.l1_bytes = kCap;
  s.l1_used = used;
  s.level = level;
  s.has_l2 = true;
  return s;
}

}  // namespace

TEST_CASE("free above the warning watermark is safe, at it warning and demotion to target_free", "[memory][pressure]") {
  PressurePlan plan = plan_pressure(at(849), kMarks, PressureStage::Start);  // 151 free > 150
  CHECK(plan.done);
  CHECK_FALSE(plan.level);  // already safe: no transition
  plan = plan_pressure(at(849, PressureLevel::Warning), kMarks, PressureStage::Start);
  REQUIRE(plan.level);
  CHECK(*plan.level == PressureLevel::Safe);
  CHECK(plan.reason == "L1 free above the warning watermark");

  plan = plan_pressure(at(850), kMarks, PressureStage::Start);  // 150 free: not above
  CHECK_FALSE(plan.done);
  REQUIRE(plan.level);
  CHECK(*plan.level == PressureLevel::Warning);
  CHECK(plan.demote_bytes == 100);  // down to 750 used, 25% free
  // Already in warning: no second transition, the same demotion.
  plan = plan_pressure(at(850, PressureLevel::Warning), kMarks, PressureStage::Start);
  CHECK_FALSE(plan.level);
  CHECK(plan.demote_bytes == 100);
}

TEST_CASE("after demotion: safe again, or danger with its reason and one budget request", "[memory][pressure]") {
  PressurePlan plan = plan_pressure(at(750, PressureLevel::Warning), kMarks, PressureStage::AfterDemotion);
  CHECK(plan.done);
  REQUIRE(plan.level);
  CHECK(*plan.level == PressureLevel::Safe);
  CHECK(plan.reason == "demotion brought L1 free above the warning watermark");

  PressureState s = at(900, PressureLevel::Warning);
  s.pinned_bytes = 500;
  plan = plan_pressure(s, kMarks, PressureStage::AfterDemotion);
  REQUIRE(plan.level);
  CHECK(*plan.level == PressureLevel::Danger);
  CHECK(plan.reason == "pinned and in-use pages fill L1");
  CHECK(plan.tighten_budget);
  CHECK(plan.requantize_pages == 0);  // no long tail
  CHECK(plan.done);
  CHECK_FALSE(plan.overflowing);
  // Already in danger: no new request.
  s.level = PressureLevel::Danger;
  CHECK_FALSE(plan_pressure(s, kMarks, PressureStage::AfterDemotion).tighten_budget);

  const auto reason = [&](PressureState state) {
    state.level = PressureLevel::Warning;
    return plan_pressure(state, kMarks, PressureStage::AfterDemotion).reason;
  };
  PressureState no_l2 = at(900);
  no_l2.has_l2 = false;
  CHECK(reason(no_l2) == "no L2 tier");
  PressureState stopped = at(900);
  stopped.l2_stopped = true;
  CHECK(reason(stopped) == "L2 full or failing");
  PressureState pinned = at(960);
  pinned.pinned_bytes = 950;
  CHECK(reason(pinned) == "pinned pages alone near the L1 cap");
  PressureState low = at(100);
  low.machine_low = true;
  CHECK(reason(low) == "MemAvailable below mem_available_floor_bytes");
}

TEST_CASE("danger requantizes the long tail down to target_free, then decides", "[memory][pressure]") {
  PressureState s = at(1030, PressureLevel::Danger);
  s.long_tail = true;
  s.page_bytes = 100;
  s.small_page_bytes = 30;
  PressurePlan plan = plan_pressure(s, kMarks, PressureStage::AfterDemotion);
  CHECK_FALSE(plan.done);                 // AfterRequantization decides
  CHECK(plan.requantize_pages == 4);      // 280 bytes over target, 70 saved a page
  // Requantization brought L1 down: safe, and an open overflow episode closes.
  s.l1_used = 750;
  s.overflowing = true;
  plan = plan_pressure(s, kMarks, PressureStage::AfterRequantization);
  REQUIRE(plan.level);
  CHECK(*plan.level == PressureLevel::Safe);
  CHECK(plan.reason == "requantization brought L1 free above the warning watermark");
  CHECK_FALSE(plan.overflowing);
  // Still over the cap: an overflow episode opens once, with the reason.
  s.l1_used = 1010;
  s.overflowing = false;
  plan = plan_pressure(s, kMarks, PressureStage::AfterRequantization);
  CHECK(plan.done);
  CHECK(plan.overflowing);
  CHECK(plan.overflow_opened);
  CHECK(plan.overflow_reason == "L1 holds more than l1_bytes: pinned and in-use pages fill L1");
  s.overflowing = true;
  plan = plan_pressure(s, kMarks, PressureStage::AfterRequantization);
  CHECK(plan.overflowing);
  CHECK_FALSE(plan.overflow_opened);
  // A long tail that saves nothing is not planned.
  s.small_page_bytes = 100;
  CHECK(plan_pressure(s, kMarks, PressureStage::AfterDemotion).requantize_pages == 0);
}
