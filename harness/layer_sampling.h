// Which of a model's layers a case executes, and the one conversion between the executed
// layers and the whole model. A synthetic case runs `sample_layers` of its preset's layers,
// spread evenly; a llama case runs them all. Budgets are the whole model's: the executed layers
// get their share, and what they measured is scaled back up to the whole model.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvbench {

struct LayerSampling {
  int layers = 1;   // the model's
  int samples = 1;  // executed, 1..layers

  // sample_layers: the suite's request (at most the model's layers: the suite check refuses more).
  static LayerSampling of(int layers, int sample_layers) { return {layers, std::min(sample_layers, layers)}; }
  static LayerSampling all(int layers) { return {layers, layers}; }

  // Whole model / executed layers: the factor on every per-layer figure.
  double scale() const { return static_cast<double>(layers) / samples; }
  // The executed layers' share of a whole-model budget, rounded down.
  std::size_t executed_share(std::size_t whole_bytes) const {
    return static_cast<std::size_t>(static_cast<double>(whole_bytes) * samples / layers);
  }
  // The whole model's bytes for what the executed layers hold, rounded up.
  std::uint64_t whole_bytes(std::uint64_t executed_bytes) const {
    return static_cast<std::uint64_t>(std::ceil(static_cast<double>(executed_bytes) * layers / samples));
  }
  // The executed layers: the middle of each of `samples` equal slices of the model.
  std::vector<int> executed_layers() const {
    std::vector<int> out;
    for (int i = 0; i < samples; ++i) out.push_back((2 * i + 1) * layers / (2 * samples));
    return out;
  }
};

}  // namespace kvbench
