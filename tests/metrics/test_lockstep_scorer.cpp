// The lockstep scorer: the reference runs on the tested model's tokens, only positions whose
// next token lies in the sequence are scored, and each sequence starts the reference afresh.
#include <catch2/catch.hpp>

#include <stdexcept>

#include "lockstep_scorer.h"
#include "model/tokenizer.h"
#include "test_support.h"

using namespace kv;
using namespace kvbench;

namespace {

std::shared_ptr<const LlamaWeights> weights() {
  static const auto w = std::make_shared<const LlamaWeights>(load_llama2c(kvtest::model_file("stories260K.bin")));
  return w;
}

CacheConfig cache(Format format) {
  CacheConfig c;
  c.geometry = {5, 8, 4, 8, 512};
  c.k_format = c.v_format = format;
  c.page_tokens = 16;
  c.threads = 1;
  return c;
}

// The tested side: a model on its own cache, fed chunk by chunk; returns the scorer's report.
AccuracyReport run(Format tested_format, const std::vector<std::vector<int>>& sequences, int chunk) {
  ThreadPool pool(1);
  LlamaModel tested(weights(), 64, pool), reference(weights(), 64, pool);
  KVCache tested_cache(cache(tested_format)), reference_cache(cache(Format::F32));
  LockstepScorer scorer(reference, reference_cache);
  StepBuffers buffers;
  for (const std::vector<int>& tokens : sequences) {
    const auto length = static_cast<int>(tokens.size());
    scorer.begin_sequence(length);
    const SeqId seq = tested_cache.create_sequence();
    for (int pos = 0; pos < length; pos += chunk) {
      const int n = std::min(chunk, length - pos);
      run_step(tested, tested_cache, seq, tokens.data() + pos, n, pos, buffers);
      scorer.score(tokens.data() + pos, n, pos, tested.logits());
    }
    tested_cache.release(seq);
  }
  scorer.end_sequence();
  CHECK(reference_cache.stats().sealed_pages + reference_cache.stats().residual_pages == 0);  // every sequence released
  return scorer.report();
}

const std::vector<int> kFirst = {1, 403, 407, 261, 378, 365, 270, 259, 496, 285, 269, 302, 267, 44, 432, 401, 264, 290, 271, 390};
const std::vector<int> kSecond = {1, 300, 280, 295, 263, 310, 46, 261, 333, 329, 270, 401};

}  // namespace

TEST_CASE("lockstep: an identical tested side scores perfectly, every position with a next token", "[metrics][model]") {
  for (int chunk : {1, 7, 32}) {
    INFO("chunk " << chunk);
    const AccuracyReport r = run(Format::F32, {kFirst, kSecond}, chunk);
    CHECK(r.predictions == kFirst.size() - 1 + kSecond.size() - 1);  // a sequence's last token has nothing to predict
    CHECK(r.kl_max == 0.0);
    CHECK(r.top1_agree == 1.0);
    CHECK(r.mean_nll == r.reference_mean_nll);
  }
}

TEST_CASE("lockstep: each sequence starts the reference at position 0", "[metrics][model]") {
  // The same sequence twice scores what it scores once: the second starts from an empty cache.
  const AccuracyReport once = run(Format::Q4, {kFirst}, 4);
  const AccuracyReport twice = run(Format::Q4, {kFirst, kFirst}, 4);
  CHECK(twice.predictions == 2 * once.predictions);
  CHECK(twice.reference_mean_nll == Approx(once.reference_mean_nll).epsilon(1e-12));
  CHECK(twice.mean_nll == Approx(once.mean_nll).epsilon(1e-12));
  // A quantized tested cache does differ from the reference: the comparison is live.
  CHECK(once.kl_max > 0.0);
}

TEST_CASE("lockstep: scoring outside a sequence is a programming error", "[metrics]") {
  ThreadPool pool(1);
  LlamaModel reference(weights(), 64, pool);
  KVCache reference_cache(cache(Format::F32));
  LockstepScorer scorer(reference, reference_cache);
  const std::vector<float> logits(static_cast<std::size_t>(reference.vocab_size()), 0.0f);
  CHECK_THROWS_AS(scorer.score(kFirst.data(), 1, 0, logits), std::logic_error);
  scorer.begin_sequence(4);
  CHECK_THROWS_AS(scorer.score(kFirst.data(), 2, 0, logits), std::logic_error);  // logits of one token for two
}
