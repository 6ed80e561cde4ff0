// The published heads' channel layout, shared by the generator (synthetic_published.cpp) and
// its config checks (synthetic_published_validate.cpp), which must agree on what fits a head.
#pragma once

#include <algorithm>
#include <cstddef>

#include "model/synthetic.h"

namespace kv::published {

inline constexpr int kMinFree = 2;  // free channels a query's noise needs
// The features' order from the first feature channel (ch_sink_): sink, log weight, visual,
// then the span classes, the code subspace and the needles.
inline constexpr int kFeatureSink = 0, kFeatureLogWeight = 1, kFeatureVisual = 2, kFeatureClass = 3;
// Span classes: 0 every head's (A), 1 the group's shared retrieval spans (B0), 2 the diffuse
// extra (C), 3 + g q head g's own (Bg).
inline constexpr int kClassAll = 0, kClassShared = 1, kClassDiffuse = 2, kClassOwn = 3;

inline int group_of(const SyntheticPreset& p) { return p.q_heads / p.kv_heads; }
inline int code_dims_for(int dim) { return std::max(4, dim / 16); }
// Content channels a head needs: sink, log-weight and visual indicators, the span classes, the
// code subspace, one per needle, and free channels for the outliers and the query noise.
inline int content_needed(const SyntheticPreset& p, std::size_t needles, int outliers) {
  return kFeatureClass + kClassOwn + group_of(p) + code_dims_for(p.head_dim) + static_cast<int>(needles) + outliers + kMinFree;
}

}  // namespace kv::published
