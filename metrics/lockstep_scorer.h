// The lockstep reference, the one place its protocol lives: the same model with an F32 cache
// and full attention runs on the same tokens as the tested model, and every position whose next
// token lies in the sequence is scored against the tested model's logits (AccuracyAccumulator).
// `kvbench score` (teacher-forced windows, score_tokens) and the llama side of a run (the
// executor) both feed it; neither scores on its own.
#pragma once

#include <optional>
#include <vector>

#include "accuracy.h"
#include "kv_cache.h"
#include "model/backend.h"
#include "model/llama_model.h"

namespace kvbench {

class LockstepScorer {
 public:
  // reference: the model that runs on reference_cache (F32, full attention); both outlive this.
  LockstepScorer(kv::LlamaModel& reference, kv::KVCache& reference_cache);
  ~LockstepScorer();
  LockstepScorer(const LockstepScorer&) = delete;
  LockstepScorer& operator=(const LockstepScorer&) = delete;

  // A new sequence from position 0, of `length` tokens: its last token has no next token to
  // score. Releases the previous one.
  void begin_sequence(int length);
  // After the tested model ran tokens[0..n) at pos and computed tested_logits [n][vocab]: the
  // reference runs on the same tokens, and positions pos..pos+n-1 are scored where the next
  // token lies in the sequence.
  void score(const int* tokens, int n, int pos, const std::vector<float>& tested_logits);
  // The reference runs on tokens[0..n) at pos and nothing is scored: tokens the tested model
  // chose itself (free-running decode), which the reference must hold for what follows.
  void follow(const int* tokens, int n, int pos);
  void end_sequence();
  AccuracyReport report() const { return accumulator_.report(); }

 private:
  kv::LlamaModel& reference_;
  kv::KVCache& cache_;
  kv::StepBuffers buffers_;
  std::optional<kv::SeqId> seq_;
  int length_ = 0;
  AccuracyAccumulator accumulator_;
};

}  // namespace kvbench
