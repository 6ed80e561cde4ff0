// `kvbench attn-stats`: how a real model attends over a text (metrics/attention_stats.h), per
// layer and q head, beside the figures the synthetic generator is configured with.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "attention_stats.h"

namespace kvbench {

struct AttnStatsOptions {
  std::string model;      // llama2.c .bin or .gguf
  std::string tokenizer;  // llama2.c tokenizer (not needed for .gguf)
  std::string text;
  AttentionStatsOptions stats{0, 0, 4, 64, 0.10, 0};  // window 0: the model's context
  int threads = 1;
  bool json = false;
};

void add_attn_stats_command(CLI::App& app, AttnStatsOptions& options);
int run_attn_stats(const AttnStatsOptions& options);

}  // namespace kvbench
