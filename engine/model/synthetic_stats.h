// Measures the synthetic generator's statistics on its own output, with the exact softmax
// (double precision): what `kvbench synth-stats` prints and what the tests check.
#pragma once

#include "model/synthetic.h"

namespace kv {

struct SyntheticStats {
  int ctx = 0;
  int steps = 0;
  // Decode attention mass by category, mean over sampled layers, q heads and steps; and the
  // range over (layer, q head).
  double sink_mass = 0.0, window_mass = 0.0, heavy_mass = 0.0, tail_mass = 0.0;
  double sink_mass_min = 1.0, sink_mass_max = 0.0;
  double window_mass_min = 1.0, window_mass_max = 0.0;
  double heavy_mass_min = 1.0, heavy_mass_max = 0.0;
  double heavy_token_share = 0.0;  // heavy hitters / context tokens
  double query_cosine = 0.0;       // consecutive decode queries of a head, mean
  double outlier_gain = 0.0;       // outlier channels' mean |k| / median channel mean |k|
  double outlier_gain_min = 0.0, outlier_gain_max = 0.0;
  int needles = 0;                 // planted needles inside the context
  double needle_mass = 0.0;        // mean attention weight a question puts on its needle
  double needle_top1 = 0.0;        // share of (question, head) where the needle is the top token
};

// Decode queries at positions ctx-1 .. ctx-2+steps over the generated context. Uses `pool`.
SyntheticStats measure_synthetic(SyntheticModel& model, int ctx, int steps, ThreadPool& pool);

}  // namespace kv
