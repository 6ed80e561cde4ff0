// One engine run of a prepared case: the engine built from its policy (the synthetic generator or
// the llama model, the KV cache, the sparse decoder, a draft for speculative decoding), its
// script executed with the machine's load measured around it, and what the run leaves for the
// store: host and exact figures, series, histograms, events, and the per-step counts each SoC
// profile prices.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "case_preparation.h"
#include "case_pricing.h"
#include "memory/file_io.h"
#include "results_store.h"

namespace kvbench {

struct EngineRun {
  RepetitionRecord record;  // host and exact figures, series, histograms, events
  std::vector<kv::soc::StepOps> steps;
  PricedCase priced;           // its steps pointer is set when priced
  double peak_l1_bytes = 0.0;  // whole model
};

// What a SoC imposes on an engine run of its own (0: the policy's).
struct Capacities {
  std::size_t l0_bytes = 0;
  std::size_t l1_bytes = 0;
};

// How an engine run is taken. Measured: as a host run takes it - its timings, the machine's load
// around it, quality checks. Counted: a sim run's child under callgrind (harness/sim_run.h): the
// cache serial (every instruction of its work on the driving thread, CacheConfig::serial), no
// quality checks or machine probes, and no test_slowdown (busy work sized by the CPU clock);
// only its counts are kept.
enum class EngineRunKind : std::uint8_t { Measured, Counted };

struct RepetitionContext {
  std::uint64_t seed = 0;
  double noise_threshold = 0.0;
  const std::string* l2_dir = nullptr;  // the run's own L2 subdirectory for this case ("" none)
  kv::FileIo* l2_io = nullptr;
  const std::atomic<bool>* stop = nullptr;
  const Capacities* capacities = nullptr;  // a SoC's rerun; nullptr: the policy's own
  bool prefix_warm = false;                // SuiteConfig::prefix_warm
  // SuiteConfig::device: a repetition that starts at or above it is flagged noisy.
  std::optional<double> max_start_temp_c;
  EngineRunKind kind = EngineRunKind::Measured;
};

// Throws ExecutionStopped when context.stop reads true, and whatever the engine throws.
EngineRun run_engine(const PreparedCase& c, const RepetitionContext& context, int repetition);

// What a counted run executed (its phases), for the figures made of its counts.
struct CountedRun {
  int prefill_tokens = 0;
  int decode_tokens = 0;
  std::string kernel_path;  // the attention kernels' path (kv::isa_name)
};
// A Counted run (context.kind is set to Counted): the engine's work alone, nothing measured or
// stored. A prefix-cache warm start runs before it, its counts discarded.
CountedRun run_engine_counted(const PreparedCase& c, RepetitionContext context);

}  // namespace kvbench
