#include "accuracy.h"

#include <algorithm>
#include <cmath>

#include "lockstep_scorer.h"
#include "model/llama_model.h"
#include "sparse/sparse_decoder.h"
#include "runtime/error.h"

namespace kvbench {

namespace {

// log-softmax in double.
void log_softmax(const float* logits, int n, std::vector<double>& out) {
  out.resize(static_cast<std::size_t>(n));
  const double top = *std::max_element(logits, logits + n);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i]) - top);
  const double log_sum = top + std::log(sum);
  for (int i = 0; i < n; ++i) out[static_cast<std::size_t>(i)] = static_cast<double>(logits[i]) - log_sum;
}

}  // namespace

void AccuracyAccumulator::add(const float* reference_logits, const float* test_logits, int target) {
  static thread_local std::vector<double> ref, test;
  log_softmax(reference_logits, vocab_, ref);
  log_softmax(test_logits, vocab_, test);
  const auto t = static_cast<std::size_t>(target);
  nll_ -= test[t];
  reference_nll_ -= ref[t];
  double kl = 0.0;
  for (std::size_t i = 0; i < ref.size(); ++i) kl += std::exp(ref[i]) * (ref[i] - test[i]);
  kl_.push_back(std::max(0.0, kl));
  const double dp = std::exp(test[t]) - std::exp(ref[t]);
  dp_squares_ += dp * dp;
  const auto argmax = [&](const std::vector<double>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
  agree_ += argmax(ref) == argmax(test) ? 1 : 0;
}

AccuracyReport AccuracyAccumulator::report() const {
  AccuracyReport r;
  r.predictions = kl_.size();
  if (r.predictions == 0) return r;
  const auto n = static_cast<double>(r.predictions);
  r.mean_nll = nll_ / n;
  r.reference_mean_nll = reference_nll_ / n;
  r.ppl = std::exp(r.mean_nll);
  r.reference_ppl = std::exp(r.reference_mean_nll);
  r.ppl_delta_pct = 100.0 * (r.ppl / r.reference_ppl - 1.0);
  double total = 0.0;
  for (double kl : kl_) total += kl;
  r.kl_mean = total / n;
  std::vector<double> sorted = kl_;
  std::sort(sorted.begin(), sorted.end());
  r.kl_max = sorted.back();
  r.kl_p99 = sorted[static_cast<std::size_t>(std::ceil(0.99 * n)) - 1];  // nearest rank
  r.top1_agree = static_cast<double>(agree_) / n;
  r.dp_rms = std::sqrt(dp_squares_ / n);
  return r;
}

AccuracyReport score_tokens(std::shared_ptr<const kv::LlamaWeights> weights, const kv::CacheConfig& reference,
                            const kv::CacheConfig& tested, const std::vector<int>& tokens, const ScoringConfig& scoring,
                            kv::ThreadPool& pool) {
  if (scoring.window < 2) throw kv::InputError("scoring", "window", "must be >= 2 tokens");
  if (scoring.chunk < 1) throw kv::InputError("scoring", "chunk", "must be >= 1");
  kv::LlamaModel ref_model(weights, scoring.window, pool);
  kv::LlamaModel test_model(weights, scoring.window, pool);
  kv::KVCache ref_cache(reference);
  kv::KVCache test_cache(tested);
  LockstepScorer lockstep(ref_model, ref_cache);
  const bool sparse = scoring.sparse.selector != kv::Selector::Full;
  kv::StepBuffers buffers;
  const auto total = static_cast<int>(tokens.size());
  int windows = 0;
  for (int start = 0; start + 1 < total; start += scoring.window) {
    if (scoring.max_windows > 0 && windows++ == scoring.max_windows) break;
    const int length = std::min(scoring.window, total - start);
    lockstep.begin_sequence(length);
    const kv::SeqId test_seq = test_cache.create_sequence();
    std::unique_ptr<kv::SparseDecoder> decoder;
    if (sparse) decoder = std::make_unique<kv::SparseDecoder>(test_cache, scoring.sparse);
    for (int pos = 0; pos < length; pos += scoring.chunk) {
      const int n = std::min(scoring.chunk, length - pos);
      const int* step = tokens.data() + start + pos;
      kv::run_step(test_model, test_cache, test_seq, step, n, pos, buffers, kv::StepAttention::Full, decoder.get());
      lockstep.score(step, n, pos, test_model.logits());
    }
    lockstep.end_sequence();
    test_cache.release(test_seq);
  }
  return lockstep.report();
}

}  // namespace kvbench
