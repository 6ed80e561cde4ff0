#include "sparse/sparse_decoder.h"

#include <algorithm>

#include "runtime/error.h"
#include "sparse/quest.h"

namespace kv {

SparseDecoder::SparseDecoder(KVCache& cache, const SparsePolicy& policy, Telemetry* telemetry)
    : cache_(cache), policy_(policy), telemetry_(telemetry) {
  validate_sparse_policy(policy_, "sparse policy");
}

void SparseDecoder::set_budget(float fraction, int pages) {
  SparsePolicy next = policy_;
  next.budget = fraction;
  next.budget_pages = pages;
  validate_sparse_policy(next, "SparseDecoder::set_budget");
  policy_ = next;
  if (telemetry_ != nullptr) telemetry_->on_budget_change({step_, fraction, pages});
}

const std::vector<std::vector<float>>& SparseDecoder::accumulated(SeqId seq, int layer) const {
  static const std::vector<std::vector<float>> empty;
  auto it = accumulated_.find({seq, layer});
  return it == accumulated_.end() ? empty : it->second;
}

void SparseDecoder::forget(SeqId seq) {
  for (auto it = accumulated_.begin(); it != accumulated_.end();) {
    it = it->first.first == seq ? accumulated_.erase(it) : std::next(it);
  }
  for (auto it = last_decay_step_.begin(); it != last_decay_step_.end();) {
    it = it->first.first == seq ? last_decay_step_.erase(it) : std::next(it);
  }
}

void SparseDecoder::attend(SeqId seq, int layer, const float* q, float* out) {
  const ModelGeometry& g = cache_.config().geometry;
  const std::vector<std::vector<PageView>> views = cache_.page_views(seq, layer);
  const auto pages = views[0].size();
  int context = 0;
  for (const PageView& v : views[0]) context += v.tokens;

  // Accumulated attention: one slot per page, decayed once per step.
  auto& acc = accumulated_[{seq, layer}];
  acc.resize(static_cast<std::size_t>(g.kv_heads));
  int& last = last_decay_step_[{seq, layer}];
  const bool decay_now = last != step_;
  last = step_;
  for (auto& head : acc) {
    head.resize(pages, 0.0f);
    if (decay_now) {
      for (float& x : head) x *= policy_.decay;
    }
  }
  std::vector<std::vector<float>> bounds;
  if (policy_.selector == Selector::Quest || policy_.selector == Selector::Hybrid) bounds = quest_bounds(views, q, g.q_heads, page_kernels(cache_.isa()), &cache_.pool());
  const SelectionInput input{context, cache_.config().page_tokens, g.kv_heads, &bounds, &acc};
  last_plan_ = plan_selection(policy_, input);
  std::vector<std::vector<float>> mass;
  AttendOptions options;
  options.plan = &last_plan_;
  options.page_mass = &mass;
  options.compensate = policy_.compensation == Compensation::MeanV;
  cache_.attend(seq, layer, q, 1, out, options);

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
      kept_tokens += views[static_cast<std::size_t>(h)][page].tokens;
    }
    event.kept_tokens.push_back(kept_tokens);
    dropped_share_sum_ += context > 0 ? 1.0 - static_cast<double>(kept_tokens) / context : 0.0;
    ++selections_;
  }
  if (telemetry_ != nullptr) telemetry_->on_selection(event);
}

}  // namespace kv
