#include "sparse/sparse_decoder.h"

#include <algorithm>
#include <cmath>

#include "runtime/clock.h"
#include "runtime/error.h"
#include "sparse/quest.h"

namespace kv {

SparseDecoder::SparseDecoder(KVCache& cache, const SparsePolicy& policy, Telemetry* telemetry, const ExactKV* exact)
    : cache_(cache), policy_(policy), telemetry_(telemetry), exact_(exact), budget_requests_served_(cache.budget_requests()) {
  validate_sparse_policy(policy_, "sparse policy");
}

void SparseDecoder::serve_budget_requests() {
  // Requests from before this decoder existed were never its to serve (the constructor).
  while (budget_requests_served_ < cache_.budget_requests()) {
    ++budget_requests_served_;
    if (tighten_budget()) cache_.budget_tightened();
  }
}

bool SparseDecoder::tighten_budget() {
  if (!policy_.needs_budget()) return false;
  if (policy_.budget_pages > 0) {
    if (policy_.budget_pages <= 1) return false;
    set_budget(0.0f, policy_.budget_pages / 2);
    return true;
  }
  if (policy_.budget <= kMinTightenedBudget) return false;
  set_budget(std::max(kMinTightenedBudget, policy_.budget * 0.5f), 0);
  return true;
}

void SparseDecoder::set_budget(float fraction, int pages) {
  SparsePolicy next = policy_;
  next.budget = fraction;
  next.budget_pages = pages;
  validate_sparse_policy(next, "SparseDecoder::set_budget");
  if (telemetry_ != nullptr) telemetry_->on_budget_change({step_, fraction, pages, policy_.budget, policy_.budget_pages});
  policy_ = next;
}

const std::vector<std::vector<float>>& SparseDecoder::accumulated(SeqId seq, int layer) const {
  static const std::vector<std::vector<float>> empty;
  auto it = history_.find({seq, layer});
  return it == history_.end() ? empty : it->second.accumulated;
}

void SparseDecoder::forget(SeqId seq) {
  for (auto it = history_.begin(); it != history_.end();) {
    it = it->first.first == seq ? history_.erase(it) : std::next(it);
  }
}

void SparseDecoder::report_selection(Phase phase, std::uint64_t start_ns, std::size_t pages, bool bounded) {
  if (telemetry_ == nullptr) return;
  telemetry_->on_span(phase, Span::Select, monotonic_ns() - start_ns);
  // The cost model's view: one plan, and the Quest bound products when bounds were computed.
  const ModelGeometry& g = cache_.config().geometry;
  OpCounts ops;
  if (bounded) ops.bound_products = pages * static_cast<std::uint64_t>(g.q_heads) * g.head_dim;
  ops.selections = 1;
  telemetry_->on_ops(phase, ops);
}

void SparseDecoder::attend(SeqId seq, int layer, const float* q, float* out) {
  serve_budget_requests();  // appending may have entered danger
  const ModelGeometry& g = cache_.config().geometry;
  const int page_tokens = cache_.config().page_tokens;
  // Selection reads the key bounds alone; the cache views only the planned pages.
  cache_.key_bounds(seq, layer, key_bounds_);
  const auto pages = key_bounds_[0].pages(g.head_dim);
  const int context = cache_.length(seq, layer);

  // Accumulated attention: one slot per page, decayed once per step.
  History& history = history_[{seq, layer}];
  auto& acc = history.accumulated;
  acc.resize(static_cast<std::size_t>(g.kv_heads));
  const bool decay_now = history.decayed_at != step_;
  history.decayed_at = step_;
  for (auto& head : acc) {
    head.resize(pages, 0.0f);
    if (decay_now) {
      for (float& x : head) x *= policy_.decay;
    }
  }
  const std::uint64_t select_start = telemetry_ != nullptr ? monotonic_ns() : 0;
  std::vector<std::vector<float>> bounds;
  if (policy_.selector == Selector::Quest || policy_.selector == Selector::Hybrid) {
    bounds = quest_bounds(key_bounds_, g.head_dim, q, g.q_heads, page_kernels(cache_.isa()), &cache_.pool());
  }
  const SelectionInput input{context, page_tokens, g.kv_heads, &bounds, &acc};
  last_plan_ = plan_selection(policy_, input, &cache_.pool());
  report_selection(Phase::Decode, select_start, pages, !bounds.empty());
  std::vector<std::vector<float>> mass;
  AttendOptions options;
  options.plan = &last_plan_;
  options.page_mass = &mass;
  options.compensate = policy_.compensation == Compensation::MeanV;
  options.importance = &acc;
  cache_.attend(seq, layer, q, 1, out, options);
  serve_budget_requests();  // the step may have entered danger

  SelectionEvent event;
  event.step = step_;
  event.layer = layer;
  event.context_tokens = context;
  event.budget_pages = last_plan_.budget_pages;
  for (int h = 0; h < g.kv_heads; ++h) {
    const auto& kept = last_plan_.heads[static_cast<std::size_t>(h)].pages;
    int kept_tokens = 0;
    for (std::size_t i = 0; i < kept.size(); ++i) {
      const auto page = static_cast<std::size_t>(kept[i]);
      acc[static_cast<std::size_t>(h)][page] += mass[static_cast<std::size_t>(h)][i];
      kept_tokens += std::min(page_tokens, context - kept[i] * page_tokens);  // pages are full but the last
    }
    event.kept_tokens.push_back(kept_tokens);
  }
  if (telemetry_ != nullptr) {
    event.score_histogram.assign(SelectionEvent::kScoreBins, 0);
    for (const HeadSelection& head : last_plan_.heads) {
      if (head.middle_scores.empty()) continue;
      const auto [lo, hi] = std::minmax_element(head.middle_scores.begin(), head.middle_scores.end());
      for (float score : head.middle_scores) {
        const float unit = *hi > *lo ? (score - *lo) / (*hi - *lo) : 0.0f;
        const int bin = std::min(SelectionEvent::kScoreBins - 1, static_cast<int>(unit * SelectionEvent::kScoreBins));
        ++event.score_histogram[static_cast<std::size_t>(bin)];
      }
    }
    telemetry_->on_selection(event);
  }
  last_layer_ = layer;
  last_context_ = context;
}

std::optional<SelectionQuality> SparseDecoder::check_quality(const float* q, const float* out) {
  if (!quality_due() || last_layer_ < 0) return std::nullopt;
  const SelectionQuality quality = measure_quality(last_layer_, q, out, last_context_);
  last_layer_ = -1;
  if (telemetry_ != nullptr) telemetry_->on_selection_quality(quality);
  return quality;
}

void SparseDecoder::prefill(SeqId seq, int layer, const float* q, int n_queries, float* out) {
  serve_budget_requests();  // appending may have entered danger
  const ModelGeometry& g = cache_.config().geometry;
  // Like a decode step: selection reads the key bounds, the cache views the planned pages.
  cache_.key_bounds(seq, layer, key_bounds_);
  const auto pages = key_bounds_[0].pages(g.head_dim);
  const int context = cache_.length(seq, layer);
  last_layer_ = -1;  // the plan below is a prefill chunk's: nothing to check
  // The chunk's mean query per q head scores the pages.
  const auto row = static_cast<std::size_t>(g.q_heads) * static_cast<std::size_t>(g.head_dim);
  const std::uint64_t select_start = telemetry_ != nullptr ? monotonic_ns() : 0;
  std::vector<float> mean(row, 0.0f);
  for (int i = 0; i < n_queries; ++i) {
    for (std::size_t j = 0; j < row; ++j) mean[j] += q[static_cast<std::size_t>(i) * row + j] / static_cast<float>(n_queries);
  }
  std::vector<std::vector<float>> bounds;
  if (policy_.selector == Selector::Quest || policy_.selector == Selector::Hybrid) {
    bounds = quest_bounds(key_bounds_, g.head_dim, mean.data(), g.q_heads, page_kernels(cache_.isa()), &cache_.pool());
  }
  const std::vector<std::vector<float>> no_history(static_cast<std::size_t>(g.kv_heads), std::vector<float>(pages, 0.0f));
  SparsePolicy chunk_policy = policy_;
  chunk_policy.window = policy_.window + n_queries;  // the chunk's own pages are always attended
  last_plan_ = plan_selection(chunk_policy, {context, cache_.config().page_tokens, g.kv_heads, &bounds, &no_history});
  report_selection(Phase::Prefill, select_start, pages, !bounds.empty());
  AttendOptions options;
  options.plan = &last_plan_;
  cache_.attend(seq, layer, q, n_queries, out, options);
  serve_budget_requests();
}

SelectionQuality SparseDecoder::measure_quality(int layer, const float* q, const float* out, int context) {
  const ModelGeometry& g = cache_.config().geometry;
  const int dim = g.head_dim, group = g.group(), page_tokens = cache_.config().page_tokens;
  const auto row = static_cast<std::size_t>(dim);
  const double scale = cache_.config().softmax_scale;
  SelectionQuality quality;
  quality.step = step_;
  quality.layer = layer;
  const std::vector<int> needles = exact_->needle_positions();
  // Each kv head is checked on its own (in parallel); drops are reported afterwards, in order.
  struct HeadCheck {
    double recall = 0.0, oracle = 0.0, missed = 0.0, rel_error = 0.0, cosine = 0.0;
    int criticals = 0;
    std::vector<bool> needle_kept;
    std::vector<TokenDropped> drops;
  };
  std::vector<HeadCheck> checks(static_cast<std::size_t>(g.kv_heads));
  cache_.pool().parallel_for(static_cast<std::size_t>(g.kv_heads), [&](std::size_t head) {
    const int h = static_cast<int>(head);
    HeadCheck& check = checks[head];
    std::vector<float> keys(static_cast<std::size_t>(context) * row), values(keys.size());
    std::vector<double> weights(static_cast<std::size_t>(context));
    std::vector<bool> kept(static_cast<std::size_t>(context), false);
    for (int p : last_plan_.heads[head].pages) {
      for (int t = p * page_tokens; t < std::min(context, (p + 1) * page_tokens); ++t) kept[static_cast<std::size_t>(t)] = true;
    }
    for (int needle : needles) check.needle_kept.push_back(needle >= context || kept[static_cast<std::size_t>(needle)]);
    for (int t = 0; t < context; ++t) {
      exact_->exact_key(layer, h, t, keys.data() + static_cast<std::size_t>(t) * row);
      exact_->exact_value(layer, h, t, values.data() + static_cast<std::size_t>(t) * row);
    }
    std::vector<double> exact_out(row);
    std::vector<int> order(static_cast<std::size_t>(context));
    // Exact mass per page, summed over the head's q heads: the best pages to keep (oracle).
    std::vector<double> page_mass(static_cast<std::size_t>((context + page_tokens - 1) / page_tokens), 0.0);
    for (int qh = 0; qh < group; ++qh) {
      const float* qv = q + static_cast<std::size_t>(h * group + qh) * row;
      double best = -INFINITY;
      for (int t = 0; t < context; ++t) {
        const float* key = keys.data() + static_cast<std::size_t>(t) * row;
        double dot = 0.0;
        for (int c = 0; c < dim; ++c) dot += static_cast<double>(qv[c]) * key[c];
        weights[static_cast<std::size_t>(t)] = dot * scale;
        best = std::max(best, weights[static_cast<std::size_t>(t)]);
      }
      double total = 0.0, held = 0.0;
      for (double& w : weights) total += (w = std::exp(w - best));
      for (int t = 0; t < context; ++t) {
        weights[static_cast<std::size_t>(t)] /= total;
        if (kept[static_cast<std::size_t>(t)]) held += weights[static_cast<std::size_t>(t)];
        page_mass[static_cast<std::size_t>(t / page_tokens)] += weights[static_cast<std::size_t>(t)];
      }
      check.recall += held;
      // The exact output, against what the engine returned for this q head.
      std::fill(exact_out.begin(), exact_out.end(), 0.0);
      for (int t = 0; t < context; ++t) {
        const float* value = values.data() + static_cast<std::size_t>(t) * row;
        const double w = weights[static_cast<std::size_t>(t)];
        for (int c = 0; c < dim; ++c) exact_out[static_cast<std::size_t>(c)] += w * value[c];
      }
      const float* got = out + static_cast<std::size_t>(h * group + qh) * row;
      double diff = 0.0, norm = 0.0, dot = 0.0, got_norm = 0.0;
      for (int c = 0; c < dim; ++c) {
        const double exact = exact_out[static_cast<std::size_t>(c)];
        diff += (got[c] - exact) * (got[c] - exact);
        norm += exact * exact;
        dot += got[c] * exact;
        got_norm += static_cast<double>(got[c]) * got[c];
      }
      check.rel_error += norm > 0.0 ? std::sqrt(diff / norm) : std::sqrt(diff);
      check.cosine += norm > 0.0 && got_norm > 0.0 ? dot / std::sqrt(norm * got_norm) : (diff == 0.0 ? 1.0 : 0.0);
      // The exact top-m tokens; every dropped one is a miss and a drop-log event.
      for (int t = 0; t < context; ++t) order[static_cast<std::size_t>(t)] = t;
      const int m = std::min(policy_.top_m, context);
      std::partial_sort(order.begin(), order.begin() + m, order.end(), [&](int a, int b) {
        return weights[static_cast<std::size_t>(a)] > weights[static_cast<std::size_t>(b)];
      });
      for (int i = 0; i < m; ++i) {
        const int t = order[static_cast<std::size_t>(i)];
        ++check.criticals;
        if (kept[static_cast<std::size_t>(t)]) continue;
        check.missed += 1.0;
        check.drops.push_back({step_, layer, h * group + qh, t, static_cast<float>(weights[static_cast<std::size_t>(t)])});
      }
    }
    // Summed over q heads, the mass of a page set is the sum of its pages' masses: the best set
    // of n pages is the n heaviest.
    const std::size_t n = std::min(page_mass.size(), last_plan_.heads[head].pages.size());
    std::partial_sort(page_mass.begin(), page_mass.begin() + static_cast<std::ptrdiff_t>(n), page_mass.end(), std::greater<>());
    for (std::size_t i = 0; i < n; ++i) check.oracle += page_mass[i];
  });
  double recall = 0.0, oracle = 0.0, missed = 0.0, rel_error = 0.0, cosine = 0.0;
  int criticals = 0;
  std::vector<bool> needle_kept(needles.size(), true);
  for (const HeadCheck& check : checks) {
    recall += check.recall;
    oracle += check.oracle;
    missed += check.missed;
    rel_error += check.rel_error;
    cosine += check.cosine;
    criticals += check.criticals;
    for (std::size_t n = 0; n < needles.size(); ++n) needle_kept[n] = needle_kept[n] && check.needle_kept[n];
    if (telemetry_ != nullptr) {
      for (const TokenDropped& drop : check.drops) telemetry_->on_token_dropped(drop);
    }
  }
  quality.attn_mass_recall = recall / g.q_heads;
  quality.oracle_mass_recall = oracle / g.q_heads;
  quality.attn_rel_error = rel_error / g.q_heads;
  quality.attn_cosine = cosine / g.q_heads;
  quality.critical_miss_rate = criticals > 0 ? missed / criticals : 0.0;
  for (std::size_t n = 0; n < needles.size(); ++n) {
    if (needles[n] >= context) continue;
    ++quality.needles;
    quality.needles_kept += needle_kept[n] ? 1 : 0;
  }
  return quality;
}

}  // namespace kv
