// The metric contract: every scalar a case repetition records, with its unit and clock, in one
// place. A metric that does not apply is recorded with a NULL value and the reason, never
// left out, so readers can tell "not applicable" from "lost".
#pragma once

#include <string>
#include <vector>

#include "device_conditions.h"
#include "executor.h"
#include "kv_cache.h"
#include "machine.h"
#include "recorder.h"
#include "results_store.h"

namespace kvbench {

// What one repetition left behind, for turning into metrics.
struct RepetitionFacts {
  const ExecutionResult* execution = nullptr;
  const Recorder* recorder = nullptr;
  kv::CacheStats cache;
  double token_drop_ratio = 0.0;      // the recorder's (Recorder::token_drop_ratio)
  bool synthetic = true;              // synthetic backend (else llama)
  bool has_needles = false;           // the script planted needles
  bool has_images = false;            // the script holds visual tokens
  double image_pages = 0.0;           // pages an image takes, mean over the script's images
  double image_whole_pages = 0.0;     // of them, pages the image fills alone (the visual pool's), the same mean
  bool visual_pool = false;           // the policy's visual block: images sealed read-only
  int model_layers = 0;               // the whole model's layers
  const kv::PageLayout* layout = nullptr;  // the policy's sealed page layout
  const kv::PageLayout* f16_layout = nullptr;  // the same geometry in f16 (compression ratio)
  const kv::PageLayout* visual_layout = nullptr;  // an image's whole pages' (the sealed one without visual formats)
  int kv_heads = 0;
  double ttft_target_ms = 0.0, tpot_target_ms = 0.0;
  std::uint64_t peak_rss_bytes = 0;   // 0: unmeasurable
  Noise noise;
  DeviceConditions device;            // cpufreq, thermal zones and throttling around the script
  bool noisy = false;
  double cpu_probe_ms = 0.0;          // the core-speed probe around the script (cpu_probe.h); 0: not run
  bool prefix_cache = false;          // the policy's prefix_cache
  kv::PrefixStats prefix;             // its stats at the end of the repetition
};

// The contract's scalar names, in the order they are recorded (spans included).
const std::vector<std::string>& contract_metric_names();

// A run's TTFTs, per request with a prompt in request order, as users read them: the first
// request's (the long prompt) and the median (nearest rank) of the rest (nothing with one).
struct TtftSplit {
  std::optional<double> first, followup_p50;
};
TtftSplit split_ttft(const std::vector<double>& per_request);
// Those the llama backend adds (recorded NULL on the synthetic backend).
const std::vector<std::string>& llama_metric_names();

std::vector<MetricRecord> contract_metrics(const RepetitionFacts& facts, int repetition);

// Nearest-rank percentile (p in (0, 100]) of a non-empty list.
double percentile(std::vector<double> values, double p);

}  // namespace kvbench
