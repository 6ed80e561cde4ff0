#include "lockstep_scorer.h"

#include <stdexcept>

namespace kvbench {

LockstepScorer::LockstepScorer(kv::LlamaModel& reference, kv::KVCache& reference_cache)
    : reference_(reference), cache_(reference_cache), accumulator_(reference.vocab_size()) {}

LockstepScorer::~LockstepScorer() { end_sequence(); }

void LockstepScorer::begin_sequence(int length) {
  end_sequence();
  seq_ = cache_.create_sequence();
  length_ = length;
}

void LockstepScorer::end_sequence() {
  if (seq_) cache_.release(*seq_);
  seq_.reset();
}

void LockstepScorer::score(const int* tokens, int n, int pos, const std::vector<float>& tested_logits) {
  if (!seq_) throw std::logic_error("LockstepScorer::score before begin_sequence");
  const auto vocab = static_cast<std::size_t>(reference_.vocab_size());
  if (tested_logits.size() < static_cast<std::size_t>(n) * vocab) throw std::logic_error("LockstepScorer::score: logits of fewer tokens than n");
  kv::run_step(reference_, cache_, *seq_, tokens, n, pos, buffers_);
  const std::vector<float>& reference = reference_.logits();
  for (int i = 0; i < n && pos + i + 1 < length_; ++i) {
    const std::size_t row = static_cast<std::size_t>(i) * vocab;
    accumulator_.add(reference.data() + row, tested_logits.data() + row, tokens[i + 1]);
  }
}

void LockstepScorer::follow(const int* tokens, int n, int pos) {
  if (!seq_) throw std::logic_error("LockstepScorer::follow before begin_sequence");
  kv::run_step(reference_, cache_, *seq_, tokens, n, pos, buffers_);
}

}  // namespace kvbench
