// Measures the synthetic generator's statistics on its own output, with the exact softmax
// (double precision): what `kvbench synth-stats` prints and what the tests check.
#pragma once

#include <map>
#include <string>

#include "model/synthetic.h"

namespace kv {

// One head type's figures (or all heads'), means over the (layer, q head, step) samples.
struct HeadTypeStats {
  int heads = 0;  // (layer, q head) pairs measured
  // Shares of the decode mass: sinks, the window (every token in it, span tokens included), the
  // head's spans outside the window, and the rest.
  double sink_mass = 0.0, window_mass = 0.0, heavy_mass = 0.0, floor_mass = 0.0;
  // Pages of 64 tokens, per q head: the mass its best 5% / 10% of pages hold (sinks and window
  // only as the pages they fall in).
  double oracle_page_recall_5 = 0.0, oracle_page_recall_10 = 0.0;
  double tokens_for_90pct_mass = 0.0;  // fewest tokens holding 90% of the mass
  // Mass lost when one step's best 10% of pages serves the next 4 steps (pages newer than the
  // selection are attended, as a window is), against each step's own best 10%.
  double reuse_loss_4 = 0.0;
  int reuse_samples = 0;  // 0 when fewer than 5 steps were measured
  // Share of layer l's best 10% of pages that are also among layer l+1's (same q head, step).
  double adjacent_layer_overlap = 0.0;
  int overlap_samples = 0;
  double needle_mass = 0.0;  // a question's mass on its needle's tokens (heads that answer)
  int needle_samples = 0;
};

struct SyntheticStats {
  int ctx = 0;
  int steps = 0;
  // Decode attention mass by category, mean over sampled layers, q heads and steps; and the
  // range over (layer, q head).
  double sink_mass = 0.0, window_mass = 0.0, heavy_mass = 0.0, tail_mass = 0.0;
  double sink_mass_min = 1.0, sink_mass_max = 0.0;
  double window_mass_min = 1.0, window_mass_max = 0.0;
  double heavy_mass_min = 1.0, heavy_mass_max = 0.0;
  double heavy_token_share = 0.0;  // heavy-hitter tokens (of the heads that attend them) / context
  double window_half_distance = 0.0;  // distance inside the window that holds half its mass
  double query_cosine = 0.0;       // consecutive decode queries of a head, mean
  double outlier_gain = 0.0;       // outlier channels' mean |k| / median channel mean |k|
  double outlier_gain_min = 0.0, outlier_gain_max = 0.0;
  int needles = 0;                 // planted needles inside the context
  double needle_mass = 0.0;        // mean attention weight a question puts on its needle's tokens
  double needle_top1 = 0.0;        // share of (question, head) where a needle token is the top token
  // By head type: "streaming", "retrieval", "diffuse" (published) or "uniform", and "all".
  std::map<std::string, HeadTypeStats> types;
};

struct MeasureOptions {
  int ctx = 4096;
  int steps = 8;     // decode steps measured (>= 2; reuse_loss_4 needs >= 5)
  int kv_heads = 0;  // the first this many kv heads of each layer (0: all)
};

// Decode queries at positions ctx-1 .. ctx-2+steps over the generated context, on every
// sampled layer; adjacent_layer_overlap pairs sampled layers l and l+1 when both are sampled.
SyntheticStats measure_synthetic(const SyntheticModel& model, const MeasureOptions& options, ThreadPool& pool);

}  // namespace kv
