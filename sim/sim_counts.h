// The sim clock's counts of one engine run, per counted region (engine/sim_regions.h), read from
// its callgrind dump, and the figures they make: span_<phase>_<part>_sim_<figure> for the parts
// total, attend, append and model_compute (metrics/metric_table.h).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "callgrind_profile.h"
#include "results_store.h"
#include "sim_regions.h"

namespace kvbench::sim {

struct WorkCounts {
  std::uint64_t instructions = 0;
  std::uint64_t l1_misses = 0;  // I1mr + D1mr + D1mw
  std::uint64_t ll_misses = 0;  // ILmr + DLmr + DLmw
  std::uint64_t cycles() const;  // metric_table.h: kL1MissCycles, kLLMissCycles
  WorkCounts& operator+=(const WorkCounts& other);
};

// [phase][part] in the order of kv::Phase and kv::sim::WorkPart.
using RegionCounts = std::array<std::array<WorkCounts, kv::sim::kWorkPartCount>, kv::kPhaseCount>;

// The regions' counts in a dump. Throws kv::InputError naming `where` when the dump lacks the
// cache events (a run without --cache-sim=yes) or counted work outside the regions (their sum
// must be the dump's total: anything else means collection was on where it should not be).
RegionCounts region_counts(const CallgrindProfile& profile, const std::string& where);

// What the figures of one engine run need besides its counts.
struct SimFigureContext {
  int repetition = 1;
  bool prefill_ran = false;
  bool decode_ran = false;
  bool synthetic = false;  // model compute is the generator's, never counted
};

// The sim clock's figures, every name of the metric table on that clock: a value, or NULL with
// the reason (a phase that did not run; model compute on the synthetic backend).
std::vector<MetricRecord> sim_metrics(const RegionCounts& counts, const SimFigureContext& context);

// A sim run's repetition: its host and cpu figures are left NULL with `reason` (they were not
// taken from a run like a host run's), and its sim figures added.
void record_sim_clock(RepetitionRecord& record, const std::vector<MetricRecord>& sim, const std::string& reason);

}  // namespace kvbench::sim
