// Speculative decoding on stories15M (6 layers): greedy speculation produces plain greedy
// decoding's tokens for k = 1..8 with the layers:2, layers:3 and kv (q2) drafts, divergences
// allowed only at near-ties (counted and printed), and the drafts' real acceptance.
#include <catch2/catch.hpp>

#include <cstdio>

#include "engine/model/speculative_check.h"
#include "fetched/stories15m.h"
#include "model/llama_model.h"
#include "model/llama_speculative.h"

using namespace kv;

namespace {

CacheConfig cache_config(Format format) { return kvtest::speculative_cache_config({6, 6, 6, 48, 256}, format, format, 16, 2); }

}  // namespace

TEST_CASE("stories15M: greedy speculation produces plain greedy decoding's tokens, k = 1..8, three drafts",
          "[stories15m][speculative]") {
  const kvtest::Stories15M& s = kvtest::stories15m();
  ThreadPool pool(2);
  LlamaModel model(s.weights, 256, pool);
  const std::vector<int> prompt = s.tokenizer.encode("Once upon a time", true, false);
  KVCache plain_cache(cache_config(Format::F16));
  const kvtest::Greedy plain = kvtest::plain_greedy(model, plain_cache, prompt, 256);
  REQUIRE(plain.tokens.size() > 100);
  int near_ties = 0;
  for (const std::string draft_name : {"layers:2", "layers:3", "kv"}) {
    for (int k = 1; k <= 8; ++k) {
      INFO("draft " << draft_name << ", k = " << k);
      KVCache cache(cache_config(Format::F16));
      KVCache draft_cache(cache_config(Format::Q2));
      SpeculativeDecodeStats stats;
      const std::vector<int> out = generate_speculative(model, cache, kvtest::named_draft(draft_name, draft_cache), prompt, 256, k, &stats);
      if (kvtest::first_divergence(plain, out) >= 0) ++near_ties;
      CHECK(stats.committed == stats.accepted + stats.verify_steps);
      CHECK(stats.accepted <= stats.proposed);
      CHECK(cache.stats().sealed_pages == 0);
      if (k == 2 || k == 4 || k == 8) {
        std::printf("stories15M %-8s k=%d: accept_rate %.3f, tokens per verify step %.2f (%llu verify steps)\n",
                    draft_name.c_str(), k, stats.accept_rate(), stats.tokens_per_verify(),
                    static_cast<unsigned long long>(stats.verify_steps));
      }
    }
  }
  std::printf("stories15M greedy speculation: %d near-tie divergences over 24 runs\n", near_ties);
}
