#include "sparse/sparse_decoder.h"

#include <algorithm>
#include <cmath>

#include "runtime/clock.h"
#include "runtime/error.h"
#include "sparse/quest.h"

namespace kv {

SparseDecoder::SparseDecoder(KVCache& cache, const SparsePolicy& policy, Telemetry* telemetry)
    : cache_(cache), policy_(policy), telemetry_(telemetry) {
  validate_sparse_policy(policy_, "sparse policy");
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

void SparseDecoder::set_images(SeqId seq, std::vector<ImagePages> images) {
  if (policy_.visual.enabled()) check_visual_budget(policy_.visual, images, "sparse policy");
  if (images.empty()) {
    images_.erase(seq);
  } else {
    images_[seq] = std::move(images);
  }
}

void SparseDecoder::forget(SeqId seq) {
  images_.erase(seq);
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

SelectionPlan SparseDecoder::plan_step(SeqId seq, int layer, const float* q, Phase phase) {
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
  const auto images = images_.find(seq);
  const bool visual = policy_.visual.enabled() && images != images_.end();
  std::vector<std::vector<float>> bounds;
  if (policy_.selector == Selector::Quest || policy_.selector == Selector::Hybrid || visual) {
    bounds = quest_bounds(key_bounds_, g.head_dim, q, g.q_heads, page_kernels(cache_.isa()), &cache_.pool());
  }
  const SelectionInput input{context, page_tokens, g.kv_heads, &bounds, &acc, visual ? &images->second : nullptr};
  SelectionPlan plan = plan_selection(policy_, input, &cache_.pool());
  report_selection(phase, select_start, pages, !bounds.empty());
  return plan;
}

void SparseDecoder::predict_next(SeqId seq, int layer, const float* q) {
  if (!cache_.offloads()) return;  // every page is resident: nothing to predict for
  const SelectionPlan plan = plan_step(seq, layer, q, Phase::Prefill);
  cache_.predict_next(seq, layer, plan);
}

void SparseDecoder::attend(SeqId seq, int layer, const float* q, float* out) {
  const ModelGeometry& g = cache_.config().geometry;
  const int page_tokens = cache_.config().page_tokens;
  last_plan_ = plan_step(seq, layer, q, Phase::Decode);
  const int context = cache_.length(seq, layer);
  auto& acc = history_[{seq, layer}].accumulated;
  AttendOptions options;
  options.plan = &last_plan_;
  options.compensate = policy_.compensation == Compensation::MeanV;
  options.importance = &acc;  // the call adds the step's attention mass of every kept page
  apply(cache_.attend(seq, layer, q, 1, out, options));  // the step may have entered danger

  SelectionEvent event;
  event.step = step_;
  event.layer = layer;
  event.context_tokens = context;
  event.budget_pages = last_plan_.budget_pages;
  for (int h = 0; h < g.kv_heads; ++h) {
    const auto& kept = last_plan_.heads[static_cast<std::size_t>(h)].pages;
    int kept_tokens = 0;
    for (std::size_t i = 0; i < kept.size(); ++i) {
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

void SparseDecoder::prefill(SeqId seq, int layer, const float* q, int n_queries, float* out) {
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
  apply(cache_.attend(seq, layer, q, n_queries, out, options));
}

}  // namespace kv
