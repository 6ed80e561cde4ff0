// `kvbench score`: teacher-forced accuracy of a real model with one KV configuration against
// the same model with an f32 cache and full attention (the metrics of metrics/accuracy.h).
#pragma once

#include <CLI/CLI.hpp>

namespace kvbench {

struct ScoreOptions {
  std::string model;      // llama2.c .bin or .gguf
  std::string tokenizer;  // llama2.c tokenizer (not needed for .gguf)
  std::string text;
  std::string k = "f32";
  std::string v = "f32";
  int residual_tokens = 0;
  int page_tokens = 16;
  int v_group = 32;       // V scale group; must divide the model's head_dim (clamped to it)
  int window = 0;         // 0: the model's context
  int chunk = 1;
  int max_windows = 0;
  int threads = 1;
  bool json = false;
  std::string selector = "full";
  float budget = 0.0f;
  int budget_pages = 0;
  CLI::Option* budget_option = nullptr;  // to tell a given --budget from the default
  CLI::Option* budget_pages_option = nullptr;
  int sinks = 4;
  int sparse_window = 64;
  bool compensate = false;
};

void add_score_command(CLI::App& app, ScoreOptions& options);
int run_score(const ScoreOptions& options);

}  // namespace kvbench
