// The cache's side of the pool's step: ending a pool step after an attention call or an append,
// applying the pool's relief (danger's budget request, the long tail's requantization) and
// forwarding the pool's reports to telemetry (kv_cache.h).
#include <algorithm>
#include <string>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "kv_cache.h"
#include "quant/quantizer.h"
#include "runtime/error.h"

namespace kv {

void KVCache::report_demotions(const TrafficCounters& before) {
  const TrafficCounters moved = sealed_pool_.traffic() - before;
  if (telemetry_ != nullptr && moved.demotions != 0) {
    OpCounts ops;
    ops.write(Tier::L2, config_.k_format, moved.swap_out_bytes);
    ops.demoted_pages = moved.demotions;
    telemetry_->on_ops(phase_, ops);
  }
}

void KVCache::end_pool_step(SeqId seq, LayerPages& state, int layer, bool decode, const SelectionPlan* plan,
                                 const std::vector<std::vector<float>>* mass, const AttendOptions& options) {
  const std::vector<std::vector<PageView>>& views = call_.views();
  // The pool's importance only ranks pages for demotion, which needs an L1 cap: without one,
  // skip its per-page bookkeeping on every decode step.
  const bool ranks = config_.memory.l1_bytes > 0;
  if (decode && mass != nullptr && options.importance != nullptr) {
    // The selector's importance takes the step's mass; the pool keeps a copy by page id for its
    // demotion scan, which reads pages of every sequence without the sequences' lock.
    std::vector<std::vector<float>>& importance = *options.importance;
    for (std::size_t h = 0; h < state.heads.size(); ++h) {
      std::vector<float>& head = importance[h];
      for (std::size_t i = 0; i < views[h].size(); ++i) head[static_cast<std::size_t>(views[h][i].first_token / config_.page_tokens)] += (*mass)[h][i];
      if (ranks) advisor_.set_importance(state.heads[h].sealed, head);
    }
  } else if (decode && mass != nullptr && ranks) {
    for (std::size_t h = 0; h < state.heads.size(); ++h) {
      const auto& sealed = state.heads[h].sealed;
      for (std::size_t i = 0; i < views[h].size(); ++i) {
        const PageView& view = views[h][i];
        if (view.layout == &residual_layout_) continue;
        advisor_.add_mass(sealed[static_cast<std::size_t>(view.first_token / config_.page_tokens)], (*mass)[h][i]);
      }
    }
  }
  std::vector<PageId> predicted;
  std::vector<PageId> next_layer;  // the next layer's pages this step is predicted to read
  const std::vector<const std::vector<PageId>*> sealed = sealed_pages(state);
  if (decode) state.taken_up.clear();
  if (decode && sealed_pool_.l2_enabled() && plan != nullptr) {
    sealed_pool_.count_unpredictable(MemoryAdvisor::unpredictable_loads(state.ranked, plan, sealed, sealed_pool_.step_demand_loads()));
    SelectionChurn churn = selection_churn(state.last_kept, *plan, sealed);
    if (churn.compared) sealed_pool_.selection_churn(layer, churn.new_pages(), churn.kept_pages);
    state.taken_up = std::move(churn.taken_up);
    // Layers run in order within a step: the previous layer's take-up is this step's.
    NextLayerAgreement::Step agreed;
    if (layer > 0) agreed = state.from_previous_layer.record(table_.layer(seq, layer - 1, "KVCache::attend").taken_up, *plan);
    if (layer + 1 < config_.geometry.layers) {
      const LayerPages& next = table_.layer(seq, layer + 1, "KVCache::attend");
      if (next.from_previous_layer.predicts()) next_layer = advisor_.predict_next_layer(state.taken_up, sealed_pages(next));
    }
    sealed_pool_.count_next_layer(agreed.offered, agreed.read, next_layer.size());
  }
  if (decode && advisor_.predicts()) predicted = advisor_.predict(state.history, plan, static_cast<int>(views[0].size()), sealed);
  // The next layer's call comes before this layer's next step, at the latest after one call per
  // sequence: its pages are protected until then and prefetched first, so they are in flight
  // while this layer's output is computed.
  sealed_pool_.mark_predicted(next_layer, table_.sequences() + 1);
  apply_relief(sealed_pool_.release_step(predicted, prediction_horizon()));
  next_layer.insert(next_layer.end(), predicted.begin(), predicted.end());
  sealed_pool_.finish_step(next_layer);
  forward_memory_reports();
}

void KVCache::apply_relief(const TieredPool::Relief& relief) {
  // Danger's first remedy is the sparse policy's, above the cache: a request in the outcome the
  // caller applies (CacheOutcome); the second, the long tail's requantization, is the cache's own.
  if (relief.tighten_budget) ++pending_.budget_requests;
  if (!relief.requantize) return;
  std::size_t done = 0;
  for (PageId id : relief.pages) done += requantize_page(id) ? 1 : 0;
  sealed_pool_.finish_relief(done);
}

bool KVCache::requantize_page(PageId id) {
  // Danger's long tail: the page's stored values, requantized to INT2 in a smaller frame. The
  // key bounds of every owner's summary index are rewritten from the new page, so selection
  // stays true to what attention reads; the means stay (they summarise the original values).
  if (table_.owners(id).empty()) return false;
  const int tokens = config_.page_tokens;
  const auto dim = static_cast<std::size_t>(config_.geometry.head_dim);
  std::vector<float> k(static_cast<std::size_t>(tokens) * dim), v(k.size());
  std::byte* dst = sealed_pool_.begin_requantize(id);
  const PageView src{&layout_, sealed_pool_.requantize_source(), tokens};
  for (int t = 0; t < tokens; ++t) {
    dequantize_k_row_ref(src, t, k.data() + static_cast<std::size_t>(t) * dim);
    dequantize_v_row_ref(src, t, v.data() + static_cast<std::size_t>(t) * dim);
  }
  PageStats stats;
  quantize_page(long_tail_layout_, k.data(), v.data(), tokens, dst, &stats);
  PageHeader* header = PageLayout::header(dst);
  header->version = sealed_pool_.version(id) + 1;  // even once finish_requantize() returns
  header->checksum = XXH64(dst + sizeof(PageHeader), long_tail_layout_.bytes - sizeof(PageHeader), 0);
  table_.rewrite_bounds(id, long_tail_layout_, dst);
  sealed_pool_.finish_requantize(id);
  return true;
}

void KVCache::update_memory_pressure() {
  // L1 also holds the full-precision residual and the page-summary index (bounds and means).
  sealed_pool_.set_external_bytes(residual_pool_.live_pages() * residual_layout_.bytes + table_.summary_bytes(), table_.summary_bytes());
  apply_relief(sealed_pool_.relieve_pressure());
  forward_memory_reports();
}

void KVCache::forward_memory_reports() {
  std::vector<MemoryEvent> events = sealed_pool_.take_events();
  std::vector<MemorySample> samples = sealed_pool_.take_samples();
  if (telemetry_ == nullptr) return;
  for (const MemoryEvent& e : events) telemetry_->on_memory_event(e);
  for (const MemorySample& sample : samples) telemetry_->on_memory_sample(sample);
}

}  // namespace kv
