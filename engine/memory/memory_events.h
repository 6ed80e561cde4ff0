// What the memory pool reports: pressure transitions, faults and one sample per attention call,
// prefill included (the time series of tier occupancy and swap traffic).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kv {

// Watermarks on L1 occupancy: safe while free > warning_free; warning (demote cold pages)
// below; danger when demotion cannot keep up (L2 full or failing, or pinned pages alone near
// the cap): the sparse budget is tightened and long-tail pages are requantized to INT2.
enum class PressureLevel : std::uint8_t { Safe, Warning, Danger };

inline std::string_view pressure_name(PressureLevel level) {
  switch (level) {
    case PressureLevel::Safe: return "safe";
    case PressureLevel::Warning: return "warning";
    case PressureLevel::Danger: return "danger";
  }
  return "unknown";
}

struct MemoryEvent {
  enum class Kind : std::uint8_t {
    Pressure,         // a watermark transition (from -> to)
    L2Failed,         // an L2 write failed: demotion stops (reason says which file and error)
    L2Full,           // the L2 cap is reached: demotion stops
    Requantized,      // danger requantized long-tail pages to INT2 (pages in `pages`)
    Overflow,         // L1 holds more than its cap: nothing could be demoted
    // A decode step kept mostly pages its head's previous step did not (a question switch):
    // `pages` holds the step's demand loads, `shift` the layer and the churn.
    SelectionShift,
  };
  // SelectionShift's figures (the reason says them in words).
  struct Shift {
    int layer = 0;
    std::uint64_t new_pages = 0;   // kept pages its head's previous step did not keep
    std::uint64_t kept_pages = 0;  // pages the step kept
  };
  Kind kind = Kind::Pressure;
  std::uint64_t step = 0;
  PressureLevel from = PressureLevel::Safe;
  PressureLevel to = PressureLevel::Safe;
  std::uint64_t l1_used_bytes = 0;
  std::uint64_t l1_capacity_bytes = 0;
  std::uint64_t pinned_bytes = 0;
  std::uint64_t l2_live_bytes = 0;
  std::uint64_t pages = 0;
  Shift shift;  // SelectionShift only
  std::string reason;
};

// One decode step (one attention call) of the memory pool.
struct MemorySample {
  std::uint64_t step = 0;
  std::uint64_t l0_bytes = 0;         // bytes staged through L0 this step
  std::uint64_t l1_used_bytes = 0;    // after the step
  std::uint64_t l2_live_bytes = 0;    // page bytes held in L2
  std::uint64_t swap_in_bytes = 0;    // page bytes loaded from L2 for or during this step
  std::uint64_t swap_out_bytes = 0;   // page bytes demoted to L2 during this step
  std::uint64_t dma_wait_ns = 0;      // the step's wait for pages not resident
  std::uint64_t step_ns = 0;          // wall time since the previous sample: swap bytes / step_ns is the
                                      // step's swap bandwidth (clock host)
  PressureLevel level = PressureLevel::Safe;
  std::uint64_t demand_loads = 0;     // pages the step loaded itself
  std::uint64_t prefetch_hits = 0;    // pages the step found prefetched
  std::uint64_t prefetch_unused = 0;  // prefetched pages dropped unread during the step
  std::uint64_t read_ios = 0;         // L2 read I/Os completed since the last sample (timing-dependent)
};

}  // namespace kv
