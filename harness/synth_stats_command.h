// `kvbench synth-stats`: the synthetic generator's statistics, measured on its output.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kvbench {

struct SynthStatsOptions {
  std::string preset = "llama-7b-gqa";
  int ctx = 32768;
  int steps = 8;
  int sample_layers = 2;
  int kv_heads = 0;
  std::string statistics = "published";
  std::uint64_t seed = 1;
  int threads = 0;
  bool json = false;
};

void add_synth_stats_command(CLI::App& app, SynthStatsOptions& options);
int run_synth_stats(const SynthStatsOptions& options);

}  // namespace kvbench
