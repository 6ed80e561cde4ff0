// How a real model attends: per layer and q head, over the decode-like queries of a text, the
// shares of attention mass that the sparse selectors and the synthetic generator are built
// on. The model runs its own forward pass (LlamaModel's dense layers) with exact causal attention
// in double precision instead of the KV cache, so every query's whole distribution is at hand.
// All figures are `exact` (deterministic for a model, a text and these options).
#pragma once

#include <memory>
#include <vector>

#include "model/llama_weights.h"
#include "runtime/thread_pool.h"

namespace kvbench {

struct AttentionStatsOptions {
  int window = 256;      // tokens per window of the text; each starts from position 0
  int max_windows = 0;   // 0: every whole window
  int sinks = 4;         // the first tokens of a window
  int recent = 64;       // the last tokens before and at the query
  double top_share = 0.10;  // the heaviest keys' share of the context
  int first_query = 0;   // queries at positions >= this (0: window / 2, so the context is at least
                         // half a window and longer than sinks + recent)
};

// Means over the queries of every window, per (layer, q head).
struct HeadAttention {
  int layer = 0, head = 0;
  double sink_mass = 0.0;    // mass on the first `sinks` tokens
  double recent_mass = 0.0;  // mass on the last `recent` tokens (the query's own included)
  double top_mass = 0.0;     // mass on the heaviest ceil(top_share * context) keys
  double next_layer_overlap = 0.0;  // share of those keys also among layer + 1's (same head, query); the last layer: 0
};

struct AttentionStats {
  int windows = 0;
  int queries_per_window = 0;
  int first_query = 0;
  std::vector<HeadAttention> heads;  // layer-major
  // Means over all heads (next_layer_overlap over the layers that have a next one).
  HeadAttention mean;
};

// Throws InputError for a window the model cannot hold, a text shorter than one window, or
// options out of range.
AttentionStats measure_attention(const std::shared_ptr<const kv::LlamaWeights>& weights, const std::vector<int>& tokens,
                                 const AttentionStatsOptions& options, kv::ThreadPool& pool);

}  // namespace kvbench
