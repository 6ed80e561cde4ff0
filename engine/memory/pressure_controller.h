// The memory-pressure controller as a pure function: from L1's state it says which watermark
// level holds and what to do next - bytes to demote, a smaller sparse budget to ask for, pages
// to requantize - and its owner applies that and asks again. Relief runs in three stages, each
// on the state the previous one left:
//
//   Start          free above warning_free: safe. Otherwise warning, and demote down to
//                  target_free.
//   AfterDemotion  safe again, or danger: demotion cannot keep up (no L2, L2 full or failing,
//                  pinned pages fill L1, or the machine is low on memory). Entering danger asks
//                  for a smaller budget; in danger the long tail is requantized down to
//                  target_free when the owner can.
//   AfterRequantization  safe again, or L1 stays over its cap (an overflow episode).
//
// No threads, no I/O, no callbacks: tests drive it with plain values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "memory/memory_events.h"

namespace kv {

struct PressureState {
  std::uint64_t l1_bytes = 0;      // the cap (> 0)
  std::uint64_t l1_used = 0;       // frames in use plus external bytes
  std::uint64_t pinned_bytes = 0;  // pinned pages plus external bytes: demotion never frees them
  PressureLevel level = PressureLevel::Safe;
  bool machine_low = false;        // MemAvailable below its floor: L1 counts as full
  bool has_l2 = false;
  bool l2_stopped = false;         // L2 failed or full: only clean copies can go
  bool overflowing = false;        // an overflow episode is open (reported once)
  // Long-tail requantization: the owner can shrink a full page (page_bytes) to small_page_bytes.
  bool long_tail = false;
  std::uint64_t page_bytes = 0, small_page_bytes = 0;
};

struct PressureWatermarks {
  double warning_free = 0.15;
  double target_free = 0.25;
  double danger_pinned = 0.95;
};

enum class PressureStage : std::uint8_t { Start, AfterDemotion, AfterRequantization };

struct PressurePlan {
  // The level to set first, with the transition's reason (nullopt: stay).
  std::optional<PressureLevel> level;
  std::string reason;
  bool done = false;                  // nothing more this time: no later stage to ask for
  std::uint64_t demote_bytes = 0;     // Start: bytes of L1 to free by demotion
  bool tighten_budget = false;        // AfterDemotion: danger was just entered
  std::uint64_t requantize_pages = 0; // AfterDemotion: long-tail pages to shrink, at most
  // The overflow episode after this stage: whether one is open, and whether it just opened
  // (report it, with overflow_reason).
  bool overflowing = false, overflow_opened = false;
  std::string overflow_reason;
};

PressurePlan plan_pressure(const PressureState& state, const PressureWatermarks& marks, PressureStage stage);

}  // namespace kv
