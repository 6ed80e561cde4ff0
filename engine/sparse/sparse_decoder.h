// Sparse decode through the KV cache: per step and (layer, kv head) it plans a selection
// (selection.h), attends over the planned pages only, and feeds the pages' attention mass back
// into the accumulated scores of H2O/hybrid (decayed by `decay` per step). The budget can be
// changed at run time (the memory-pressure controller tightens it); every change and every
// step's selection is reported through the Telemetry sink.
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "kv_cache.h"
#include "sparse/policy.h"
#include "sparse/selection.h"
#include "telemetry.h"

namespace kv {

class SparseDecoder {
 public:
  // Throws InputError for an invalid policy.
  SparseDecoder(KVCache& cache, const SparsePolicy& policy, Telemetry* telemetry = nullptr);

  // One decode step of (seq, layer): q [q_heads][head_dim] is the query of the newest token,
  // whose K/V are already appended; out like q.
  void attend(SeqId seq, int layer, const float* q, float* out);
  // Marks the end of a decode step (steps count selections and decay accumulated attention).
  void end_step() { ++step_; }

  // Adaptive tightening: a new budget from now on (fraction in (0, 1] or pages >= 1).
  void set_budget(float fraction, int pages);
  const SparsePolicy& policy() const { return policy_; }

  const SelectionPlan& last_plan() const { return last_plan_; }
  // Mean over every (step, layer, kv head) so far of the share of context tokens not attended.
  double token_drop_ratio() const { return selections_ > 0 ? dropped_share_sum_ / selections_ : 0.0; }
  // Accumulated attention of (seq, layer): [kv head][page].
  const std::vector<std::vector<float>>& accumulated(SeqId seq, int layer) const;
  void forget(SeqId seq);

 private:
  KVCache& cache_;
  SparsePolicy policy_;
  Telemetry* telemetry_;
  int step_ = 0;
  std::map<std::pair<SeqId, int>, std::vector<std::vector<float>>> accumulated_;
  std::map<std::pair<SeqId, int>, int> last_decay_step_;
  SelectionPlan last_plan_;
  double dropped_share_sum_ = 0.0;
  long selections_ = 0;
};

}  // namespace kv
