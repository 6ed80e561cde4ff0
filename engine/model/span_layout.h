// Where one (layer, kv head)'s heavy hitters are: spans of lognormal length with Zipf weights
// and a lognormal jitter per token, placed with a density per span class so that they cover the
// same share of any context. Span slots persist across layers: a slot keeps its span from one
// layer to the next unless it renews, so adjacent layers share most of their heavy hitters and
// distant ones fewer (a fixed share of slots never renews).
#pragma once

#include <cstdint>
#include <vector>

#include "model/synthetic.h"

namespace kv {

struct SpanPlacement {
  std::uint64_t seed = 1;
  int sinks = 4;
  int max_seq = 0;
  std::vector<ImageRange> images;  // no text spans inside them
  float median = 12.0f, sigma = 0.8f;
  int max_len = 128;
  float zipf_ranks = 64.0f;
  float token_jitter = 0.5f;
  float persistent = 0.0f;  // share of slots that never renew
  float renew = 0.0f;       // chance that another slot renews from one layer to the next
  std::vector<float> class_density;  // share of the context each class covers
};

// Layer sharing of the form c + (1 - c) p^d: the persistent share c and the per-layer keep p
// that give `adjacent` at d = 1 and `far` at d = 10. Requires 0 < far < adjacent < 1.
void layer_sharing(float adjacent, float far, float& persistent, float& renew);

class SpanLayout {
 public:
  struct Span {
    int start = 0, len = 0, cls = 0;
    float log_weight = 0.0f;  // ln(1/r) less its mean
    std::uint64_t id = 0;     // identity: the same span in two layers has the same id
  };
  struct Total {
    double tokens = 0.0;
    double weight = 0.0;  // sum of e^{x} over the tokens, x a token's log weight
  };

  SpanLayout(const SpanPlacement& placement, int layer, int kv_head);

  const std::vector<Span>& spans() const { return spans_; }
  // Calls f(span) for every span that holds `pos`.
  template <typename F>
  void for_each_at(int pos, F&& f) const {
    auto it = upper_bound_start(pos);
    while (it != spans_.begin()) {
      --it;
      if (it->start <= pos - max_len_) break;
      if (pos < it->start + it->len) f(*it);
    }
  }
  // A token's log weight inside its span: the span's, plus its own jitter.
  float token_log_weight(const Span& span, int pos) const;
  // Spans of class `cls` that end at or before `end`.
  Total before(int cls, int end) const;

 private:
  std::vector<Span>::const_iterator upper_bound_start(int pos) const;

  std::uint64_t seed_ = 0;
  int layer_ = 0, kv_head_ = 0, max_len_ = 1;
  float token_jitter_ = 0.0f;
  std::vector<Span> spans_;  // by start
  struct ClassPrefix {
    std::vector<int> ends;        // sorted
    std::vector<Total> totals;    // cumulative, totals[i] over spans 0..i-1
  };
  std::vector<ClassPrefix> prefix_;
};

}  // namespace kv
