#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "accuracy.h"
#include "model/tokenizer.h"
#include "test_support.h"

using namespace kv;
using namespace kvbench;

namespace {

struct StoriesSample {
  std::shared_ptr<const LlamaWeights> weights;
  std::vector<int> tokens;
};

const StoriesSample& sample() {
  static const StoriesSample s = [] {
    StoriesSample x;
    x.weights = std::make_shared<const LlamaWeights>(load_llama2c(kvtest::model_file("stories260K.bin")));
    const Tokenizer tok = load_llama2c_tokenizer(kvtest::model_file("tok512.bin"), 512);
    std::ifstream in(kvtest::model_file("tinystories-sample.txt"), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    x.tokens = tok.encode(text.str(), true, false);
    return x;
  }();
  return s;
}

CacheConfig cache(Format k, Format v, int residual = 0) {
  CacheConfig c;
  c.geometry = {5, 8, 4, 8, 512};
  c.k_format = k;
  c.v_format = v;
  c.page_tokens = 16;
  c.residual_tokens = residual;
  c.threads = 1;
  return c;
}

}  // namespace

TEST_CASE("Accuracy of identical logits is perfect, of different logits is not", "[metrics]") {
  AccuracyAccumulator same(4), different(4);
  const float a[4] = {1.0f, 2.0f, 3.0f, 0.5f};
  const float b[4] = {3.0f, 2.0f, 1.0f, 0.5f};
  same.add(a, a, 2);
  different.add(a, b, 2);
  const AccuracyReport s = same.report(), d = different.report();
  CHECK(s.ppl_delta_pct == 0.0);
  CHECK(s.kl_max == 0.0);
  CHECK(s.top1_agree == 1.0);
  CHECK(s.dp_rms == 0.0);
  CHECK(d.ppl_delta_pct > 0.0);
  CHECK(d.kl_mean > 0.1);
  CHECK(d.top1_agree == 0.0);
  CHECK(d.dp_rms > 0.3);
}

TEST_CASE("Test vector 4: first-window perplexity of the sample", "[metrics][model]") {
  ThreadPool pool(1);
  ScoringConfig scoring;
  scoring.max_windows = 1;
  const AccuracyReport r = score_tokens(sample().weights, cache(Format::F32, Format::F32),
                                        cache(Format::F32, Format::F32), sample().tokens, scoring, pool);
  CHECK(r.predictions == 511);
  CHECK(r.reference_mean_nll == Approx(1.311214).margin(1e-4));
  CHECK(r.reference_ppl == Approx(3.7107).margin(1e-3));
  CHECK(r.ppl_delta_pct == 0.0);
  CHECK(r.kl_max == 0.0);
  CHECK(r.top1_agree == 1.0);
}

TEST_CASE("Scoring in prefill chunks reads earlier chunks back from the cache", "[metrics][model]") {
  ThreadPool pool(1);
  ScoringConfig scoring;
  scoring.max_windows = 1;
  scoring.chunk = 64;
  const AccuracyReport f32 = score_tokens(sample().weights, cache(Format::F32, Format::F32),
                                          cache(Format::F32, Format::F32), sample().tokens, scoring, pool);
  CHECK(f32.reference_mean_nll == Approx(1.311214).margin(1e-4));
  const AccuracyReport q4 = score_tokens(sample().weights, cache(Format::F32, Format::F32),
                                         cache(Format::Q4, Format::Q4), sample().tokens, scoring, pool);
  CHECK(q4.kl_mean > 0.0);  // earlier chunks really come back quantized
}

TEST_CASE("ppl_delta_pct grows from q8 to q4 to q2", "[metrics][model]") {
  ThreadPool pool(1);
  ScoringConfig scoring;
  scoring.max_windows = 2;
  // q8 may land a hair below 0 by chance; from q8 on, each format must be worse than the last.
  double previous_delta = -1e9, previous_kl = 0.0;
  for (Format f : {Format::F32, Format::Q8, Format::Q4, Format::Q2}) {
    const AccuracyReport r =
        score_tokens(sample().weights, cache(Format::F32, Format::F32), cache(f, f), sample().tokens, scoring, pool);
    CAPTURE(format_name(f), r.ppl_delta_pct, r.kl_mean);
    if (f == Format::F32) {
      CHECK(r.ppl_delta_pct == 0.0);
      CHECK(r.kl_max == 0.0);
    } else {
      CHECK(r.ppl_delta_pct > previous_delta);
      CHECK(r.kl_mean > previous_kl);
      previous_delta = r.ppl_delta_pct;
      previous_kl = r.kl_mean;
    }
  }
}

TEST_CASE("Test vector 4: perplexity of the whole sample", "[.perplexity]") {
  ThreadPool pool(1);
  const AccuracyReport r = score_tokens(sample().weights, cache(Format::F32, Format::F32),
                                        cache(Format::F32, Format::F32), sample().tokens, ScoringConfig{}, pool);
  CHECK(r.predictions == 31324);
  CHECK(r.reference_mean_nll == Approx(1.393313).margin(1e-4));
  CHECK(r.reference_ppl == Approx(4.0282).margin(1e-3));
}

TEST_CASE("Sparse scoring: a covering budget changes nothing, a tight one costs accuracy", "[metrics][sparse]") {
  ThreadPool pool(1);
  ScoringConfig dense;
  dense.max_windows = 1;
  const AccuracyReport q4 = score_tokens(sample().weights, cache(Format::F32, Format::F32), cache(Format::Q4, Format::Q4),
                                         sample().tokens, dense, pool);
  ScoringConfig covering = dense;
  covering.sparse.selector = Selector::Hybrid;
  covering.sparse.budget = 1.0f;
  covering.sparse.window = 64;
  const AccuracyReport all = score_tokens(sample().weights, cache(Format::F32, Format::F32), cache(Format::Q4, Format::Q4),
                                          sample().tokens, covering, pool);
  CHECK(all.mean_nll == q4.mean_nll);
  ScoringConfig tight = covering;
  tight.sparse.budget = 0.25f;
  const AccuracyReport quarter = score_tokens(sample().weights, cache(Format::F32, Format::F32),
                                              cache(Format::Q4, Format::Q4), sample().tokens, tight, pool);
  CHECK(quarter.kl_mean > q4.kl_mean);
}
