// Suite configuration: the JSON a run is made of (models x workloads x policies x socs), parsed
// and validated once into typed structs. Every engine knob is a field with a default; unknown
// fields, duplicate keys, wrong types and impossible values are InputErrors naming the file,
// the JSON path (e.g. /policies/0/sparse/budget) and the reason. Sizes take units ("64MiB").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kv_cache.h"
#include "model/synthetic.h"
#include "model/synthetic_presets.h"
#include "sparse/policy.h"
#include "speculation.h"
#include "workload.h"

namespace kvbench {

struct ModelConfig {
  std::string name;
  std::string backend;        // synthetic | llama
  std::string preset;         // synthetic: a preset of engine/model/synthetic_presets
  int sample_layers = 2;      // synthetic: layers executed (the rest extrapolated)
  std::string weights;        // synthetic: f16, q8 or q4 (groups of 128); the preset's when not given
  kv::SyntheticConfig synthetic;  // synthetic: the statistics and their knobs (harness/synthetic_block.h);
                                  // the runner adds the seed, needles and images
  std::string path;           // llama: checkpoint (.bin or .gguf); bare names resolve in the models dir
  std::string tokenizer;      // llama: tok*.bin
  bool fetched = false;       // llama: files models/fetch.sh fetches: bare names are looked for in the models
                              // dir, then in the fetched-models dir, and the model's cases are skipped,
                              // with the reason, where neither holds them
};

struct PolicyConfig {
  std::string name;
  double test_slowdown = 0.0; // only to test gates: every engine thread redoes this share of its CPU time in attention calls
  kv::CacheConfig cache;      // formats, groups, pages, residual, threads, memory tiers
  kv::SparsePolicy sparse;    // selector {full} when absent
  SpeculativeConfig speculative;  // `speculative`: decode ops run draft-and-verify rounds
  std::vector<std::string> models;  // names of the suite's models it runs on; empty: every model
};

// Conditions a device must meet before each repetition (`device`).
struct DeviceGate {
  // Wait until the hottest thermal zone is below this (degrees Celsius); none: no wait.
  std::optional<double> max_start_temp_c;
  double cool_timeout_s = 600.0;  // then run anyway, flagged noisy
};

struct SuiteConfig {
  std::string file;      // where it came from ("builtin:NAME" for compiled-in suites)
  std::string base_dir;  // relative paths resolve here
  std::string name;
  std::uint64_t seed = 1;
  int repetitions = 5;
  int warmup = 1;
  double noise_threshold = 0.10;
  // Repetitions start with the prefix cache holding every sequence's first prompt (run once,
  // unrecorded, before each repetition); false: from an empty cache (cold).
  bool prefix_warm = false;
  // A sim run: every repetition's engine work is also counted under Valgrind's callgrind (the
  // sim clock, harness/sim_run.h), and its host and cpu figures are left NULL.
  bool sim = false;
  DeviceGate device;
  std::vector<ModelConfig> models;
  std::vector<WorkloadConfig> workloads;
  std::vector<PolicyConfig> policies;
  std::vector<std::string> socs;
};

// Bytes from a JSON number or a string with a unit: B, KiB, MiB, GiB (and KB, MB, GB).
std::uint64_t parse_size(const std::string& text, const std::string& file, const std::string& path);

// text: the suite's JSON; file: its name for errors; base_dir: where relative paths and named
// policies (`<base_dir>/policies/NAME.json`) resolve.
// A synthetic preset's weight precision by name (f16, q8, q4), and the preset with the one a
// suite chose (4 or 8 bits in groups of 128 with an f16 scale each, or 16 bits); only pricing
// reads it: the weights' memory, their bytes per token and the dense layers' format.
std::string weight_precision_name(const kv::SyntheticPreset& preset);
kv::SyntheticPreset with_weights(kv::SyntheticPreset preset, const std::string& weights);

SuiteConfig parse_suite(const std::string& text, const std::string& file, const std::string& base_dir);
SuiteConfig load_suite(const std::string& path);

// The resolved configuration: every field with its value, defaults filled in (a workload's
// sizes as with_defaults gives them; perplexity's 0 context means the model's). Stable key
// order, so equal configurations hash equally. It carries the benchmark definition's version
// (`benchmark_definition`, workloads/benchmark_definition.h).
std::string resolved_json(const SuiteConfig& suite);

// Why a suite, model, workload or policy name (or, tag: a run tag) cannot be used; "" when it
// can. Names are not empty and printable; a name has no '/' (case names join them with it), a
// tag no ',' (stored tags are comma-separated).
std::string name_problem(const std::string& name, bool tag = false);

}  // namespace kvbench
