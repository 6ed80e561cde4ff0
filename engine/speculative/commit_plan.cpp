#include "commit_plan.h"

#include <string>

#include "runtime/error.h"

namespace kv {

CommitPlan plan_commit(SeqId seq, int committed, std::span<const int> layer_lengths, int keep, const char* api) {
  if (layer_lengths.empty()) throw InputError(api, "seq", "the sequence has no layers");
  const int length = layer_lengths.front();
  for (std::size_t l = 1; l < layer_lengths.size(); ++l) {
    if (layer_lengths[l] != length) {
      throw InputError(api, "seq",
                       "layer " + std::to_string(l) + " holds " + std::to_string(layer_lengths[l]) + " tokens and layer 0 " +
                           std::to_string(length) + ": a verify step's forward pass is unfinished");
    }
  }
  if (length < committed) {
    throw InputError(api, "seq",
                     "the sequence holds " + std::to_string(length) + " tokens, fewer than the " + std::to_string(committed) +
                         " it held when its tentative tokens began");
  }
  CommitPlan plan;
  plan.seq = seq;
  plan.committed = committed;
  plan.tentative = length - committed;
  if (keep < 0 || keep > plan.tentative) {
    throw InputError(api, "keep",
                     std::to_string(keep) + " is outside [0, " + std::to_string(plan.tentative) + "], the tentative tokens held");
  }
  plan.keep = keep;
  return plan;
}

}  // namespace kv
