// How each SoC of a suite prices an engine run of a case: from the host run as it is, from a run
// of its own with its capacities (a smaller KV budget or L0 than the host run used), or from the
// host run as it is because it cannot hold the weights or what no demotion frees (noted). The
// decisions are pure: the runner executes them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "cache_config.h"
#include "engine_run.h"
#include "results_store.h"
#include "soc/soc_profile.h"

namespace kvbench {

// Whether a SoC's model budget holds the weights and its runtime reserve; one that does not is
// priced from the host run as it is (fits_in_memory 0) and never reruns.
bool holds_weights(const kv::soc::SocProfile& p, double weights);

// The note a SoC that does not hold the weights gets (DoesNotFit).
RunEvent weights_do_not_fit(const kv::soc::SocProfile& p, double weights);

// What a SoC does with a case given the host run's peak L1 (whole model): nothing (priced from
// the host run), a run of its own with `capacities` (CapacityRerun noted), or nothing because
// its KV budget is below `floor_bytes`, what no demotion can free (DoesNotFit noted).
struct SocPlan {
  bool rerun = false;
  Capacities capacities;
  std::optional<RunEvent> note;  // CapacityRerun or DoesNotFit
};
SocPlan plan_soc(const kv::soc::SocProfile& p, double weights, double peak_l1, const kv::MemoryConfig& memory,
                 std::uint64_t floor_bytes);

// How one SoC's case is made from an engine run.
struct Pricing {
  const kv::soc::SocProfile* profile = nullptr;
  bool host_case = false;       // the case's SoC is this host: its host-clock figures are kept
  bool rerun = false;           // the run was this SoC's own (capacity_rerun)
  std::vector<RunEvent> notes;  // why it reran, or why it does not fit
};

struct PricedRepetition {
  RepetitionRecord record;
  bool degraded = false;
};

// The stored repetition of one SoC's case: the run's exact figures (and host ones on the host's
// case), the model clock priced with the SoC's profile, and the pricing notes.
PricedRepetition priced_repetition(const EngineRun& run, const Pricing& how);

}  // namespace kvbench
