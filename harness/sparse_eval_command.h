// `kvbench sparse-eval`: a sparse policy on a synthetic layer at a long context, measured
// against exact attention (attn_mass_recall and its oracle ceiling, critical_miss_rate, needle
// recall on questions).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace kvbench {

struct SparseEvalOptions {
  std::string preset = "llama-7b-gqa";
  int ctx = 32768;
  std::string selector = "hybrid";
  float budget = 0.10f;
  std::string format = "q4";
  int steps = 8;
  bool compensate = false;
  int threads = 0;
  std::string statistics = "published";
};

void add_sparse_eval_command(CLI::App& app, SparseEvalOptions& options);
int run_sparse_eval(const SparseEvalOptions& options);

}  // namespace kvbench
