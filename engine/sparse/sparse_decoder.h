// Sparse decode through the KV cache: per step and (layer, kv head) it plans a selection
// (selection.h), attends over the planned pages only, and feeds the pages' attention mass back
// into the accumulated scores of H2O/hybrid (decayed by `decay` per step). The budget can be
// changed at run time (the memory-pressure controller tightens it); every change and every
// step's selection is reported through the Telemetry sink.
#pragma once

#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "kv_cache.h"
#include "sparse/policy.h"
#include "sparse/selection.h"
#include "telemetry.h"

namespace kv {

class SparseDecoder {
 public:
  // Throws InputError for an invalid policy. Quality on sampled steps is measured beside the
  // decoder (metrics/selection_quality.h) from last_decode_step() and last_plan().
  SparseDecoder(KVCache& cache, const SparsePolicy& policy, Telemetry* telemetry = nullptr);
  SparseDecoder(const SparseDecoder&) = delete;
  SparseDecoder& operator=(const SparseDecoder&) = delete;

  // One decode step of (seq, layer): q [q_heads][head_dim] is the query of the newest token,
  // whose K/V are already appended; out like q.
  void attend(SeqId seq, int layer, const float* q, float* out);
  // Sparse prefill: a chunk of n queries (their K/V already appended) attends to the sinks, the
  // window before and across the chunk, and the top pages by the same scores, computed for the
  // chunk's mean query. No accumulation (prefill has no decode history yet).
  void prefill(SeqId seq, int layer, const float* q, int n_queries, float* out);
  // The end of a prefill: q [q_heads][head_dim] is the prompt's last query in (seq, layer). It
  // plans the selection a decode step would make for it and hands it to the cache
  // (KVCache::predict_next), which prefetches for the first decode step. Attends to nothing.
  void predict_next(SeqId seq, int layer, const float* q);
  // Marks the end of a decode step (steps count selections and decay accumulated attention).
  void end_step() {
    ++step_;
    cache_.end_decode_step();
  }

  // Adaptive tightening: a new budget from now on (fraction in (0, 1] or pages >= 1).
  void set_budget(float fraction, int pages);
  // Memory danger's request: halves the budget, down to kMinTightenedBudget or one page, and
  // reports the change (Telemetry::on_budget_change, its one event). Returns false when it
  // cannot go lower (or the selector has no budget).
  bool tighten_budget();
  // What a cache call left to its caller (KVCache::CacheOutcome): one tightening per request.
  // attend() and prefill() apply their own calls' outcomes; whoever appends applies the append's
  // before the next step plans.
  void apply(const CacheOutcome& outcome) {
    for (int i = 0; i < outcome.budget_requests; ++i) tighten_budget();
  }
  static constexpr float kMinTightenedBudget = 0.01f;
  const SparsePolicy& policy() const { return policy_; }

  const SelectionPlan& last_plan() const { return last_plan_; }
  // The last decode attend() - this step's number, its layer and context - whose plan is
  // last_plan(); none before any, or once a prefill chunk planned since.
  struct DecodeStep {
    int step = 0;
    int layer = 0;
    int context = 0;
  };
  std::optional<DecodeStep> last_decode_step() const {
    return last_layer_ < 0 ? std::nullopt : std::optional<DecodeStep>(DecodeStep{step_, last_layer_, last_context_});
  }
  // Accumulated attention of (seq, layer): [kv head][page].
  const std::vector<std::vector<float>>& accumulated(SeqId seq, int layer) const;
  // The image pages of seq (ascending and apart; every layer alike): with the policy's visual
  // budget, each image's pages are then selected apart from the text (sparse/visual_budget.h).
  // Throws InputError, naming the field, for a budget that cannot keep min_pages_per_image of
  // an image.
  void set_images(SeqId seq, std::vector<ImagePages> images);
  void forget(SeqId seq);

 private:
  // The select span and the selection's operation counts (a null sink: nothing).
  void report_selection(Phase phase, std::uint64_t start_ns, std::size_t pages, bool bounded);
  // The decode plan of query q over (seq, layer)'s pages: key bounds, decayed accumulated
  // attention (once per step), selection. Reports the select span under `phase`.
  SelectionPlan plan_step(SeqId seq, int layer, const float* q, Phase phase);

  KVCache& cache_;
  SparsePolicy policy_;
  Telemetry* telemetry_;
  int step_ = 0;
  // Per (seq, layer): accumulated attention [kv head][page] and the step it was last decayed.
  struct History {
    std::vector<std::vector<float>> accumulated;
    int decayed_at = -1;
  };
  std::map<std::pair<SeqId, int>, History> history_;
  std::map<SeqId, std::vector<ImagePages>> images_;  // per sequence, when it has images
  SelectionPlan last_plan_;
  int last_layer_ = -1, last_context_ = 0;  // of the last decode attend() (-1: none)
  std::vector<HeadKeyBounds> key_bounds_;  // this call's key bounds (buffers kept across calls)
};

}  // namespace kv
