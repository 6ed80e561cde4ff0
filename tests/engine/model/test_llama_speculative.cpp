// Speculative decoding on the llama backend (stories260K): greedy speculation produces plain
// greedy decoding's tokens for every k and both drafts, divergences allowed only at near-ties;
// the rejection rule leaves the target's distribution; bad drafts are refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>

#include "model/llama_model.h"
#include "model/llama_speculative.h"
#include "engine/model/speculative_check.h"
#include "test_support.h"

using namespace kv;
using kvtest::first_divergence;
using kvtest::Greedy;
using kvtest::plain_greedy;

namespace {

struct SpeculativeModel {
  std::shared_ptr<const LlamaWeights> weights;
  ThreadPool pool{2};
};

SpeculativeModel& speculative_model() {
  static SpeculativeModel s{std::make_shared<const LlamaWeights>(load_llama2c(kvtest::model_file("stories260K.bin")))};
  return s;
}

CacheConfig cache_config(Format k, Format v) { return kvtest::speculative_cache_config({5, 8, 4, 8, 512}, k, v, 8, 1); }

}  // namespace

TEST_CASE("greedy speculation on stories260K produces plain greedy decoding's tokens, k = 1..8, both drafts",
          "[model][speculative]") {
  SpeculativeModel& s = speculative_model();
  LlamaModel model(s.weights, 512, s.pool);
  const CacheConfig target_config = cache_config(Format::F32, Format::F32);
  const std::vector<int> prompt{1, 403, 407, 261};
  KVCache plain_cache(target_config);
  const Greedy plain = plain_greedy(model, plain_cache, prompt, 200);
  REQUIRE(plain.tokens.size() == 200);
  int near_ties = 0;
  for (int k = 1; k <= 8; ++k) {
    for (const std::string draft_name : {"layers:2", "layers:4", "kv"}) {
      INFO("k = " << k << ", draft " << draft_name);
      KVCache cache(target_config);
      KVCache draft_cache(cache_config(Format::Q2, Format::Q2));
      SpeculativeDecodeStats stats;
      const std::vector<int> out = generate_speculative(model, cache, kvtest::named_draft(draft_name, draft_cache), prompt, 200, k, &stats);
      if (first_divergence(plain, out) >= 0) ++near_ties;
      if (k == 2 || k == 4 || k == 8) {
        std::printf("stories260K %-8s k=%d: accept_rate %.3f, tokens per verify step %.2f\n", draft_name.c_str(), k,
                    stats.accept_rate(), stats.tokens_per_verify());
      }
      CHECK(stats.verify_steps > 0);
      CHECK(stats.accepted <= stats.proposed);
      CHECK(stats.committed == stats.accepted + stats.verify_steps);
      // Every token after the prompt came from a verify step but the last position's.
      CHECK(stats.committed + prompt.size() == 200u);
      CHECK(stats.proposed <= static_cast<std::uint64_t>(k) * stats.verify_steps);
      // Nothing leaked: the sequences were released, their pages freed.
      CHECK(cache.stats().sealed_pages == 0);
      CHECK(cache.stats().residual_pages == 0);
      CHECK(draft_cache.stats().sealed_pages == 0);
    }
  }
  std::printf("stories260K greedy speculation: %d near-tie divergences over 24 runs\n", near_ties);
}

TEST_CASE("a kv draft in the target's own format agrees with it, a shallow draft agrees less", "[model][speculative]") {
  SpeculativeModel& s = speculative_model();
  LlamaModel model(s.weights, 512, s.pool);
  const std::vector<int> prompt{1};
  KVCache cache(cache_config(Format::F32, Format::F32));
  KVCache same(cache_config(Format::F32, Format::F32));
  LlamaDraft kv_draft{LlamaDraft::Kind::Kv, 0, &same};
  SpeculativeDecodeStats exact;
  generate_speculative(model, cache, kv_draft, prompt, 200, 4, &exact);
  // The same model over the same K/V: only a near-tie rounded differently may disagree.
  CHECK(exact.accept_rate() >= 0.98);
  SpeculativeDecodeStats shallow;
  generate_speculative(model, cache, LlamaDraft{LlamaDraft::Kind::Layers, 1, nullptr}, prompt, 200, 4, &shallow);
  CHECK(shallow.accept_rate() < exact.accept_rate());
  CHECK(shallow.tokens_per_verify() >= 1.0);
  CHECK(exact.tokens_per_verify() > shallow.tokens_per_verify());
}

TEST_CASE("a tight L1 with an L2 tier during drafts and verifies: pages move, the tokens stay plain decoding's",
          "[model][speculative][memory]") {
  SpeculativeModel& s = speculative_model();
  LlamaModel model(s.weights, 512, s.pool);
  kvtest::TempDir dir_plain("llama-spec-plain"), dir_spec("llama-spec-tiers");
  const auto tiered = [](const std::string& dir) {
    CacheConfig c = cache_config(Format::F32, Format::F32);
    c.memory.l1_bytes = 96u << 10;
    c.memory.l0_bytes = 16u << 10;
    c.memory.l2.dir = dir;
    c.memory.l2.segment_bytes = 4u << 20;
    c.memory.l2.batch_bytes = 16u << 10;
    c.memory.pin_sink_tokens = 0;
    c.memory.pin_window_tokens = 16;
    return c;
  };
  KVCache plain_cache(tiered(dir_plain.path));
  const Greedy plain = plain_greedy(model, plain_cache, {1}, 400);
  KVCache cache(tiered(dir_spec.path));
  SpeculativeDecodeStats stats;
  const std::vector<int> out = generate_speculative(model, cache, LlamaDraft{LlamaDraft::Kind::Layers, 2, nullptr}, {1}, 400, 6, &stats);
  first_divergence(plain, out);
  const MemoryStats memory = cache.stats().memory;
  CHECK(memory.swap_out_bytes > 0);  // the pressure is real and recorded
  CHECK(memory.swap_in_bytes > 0);
  CHECK_FALSE(memory.l2_failed);
}

TEST_CASE("the rejection rule leaves the target's distribution", "[model][speculative]") {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const std::size_t vocab = 2 + static_cast<std::size_t>(trial % 30);
    std::vector<float> target(vocab), draft(vocab);
    float st = 0.0f, sd = 0.0f;
    for (std::size_t i = 0; i < vocab; ++i) {
      target[i] = trial % 7 == 0 && i % 3 == 0 ? 0.0f : u(rng);
      draft[i] = trial % 5 == 0 && i % 2 == 0 ? 0.0f : u(rng);
      if (trial % 11 == 0) draft[i] = target[i];  // draft equals target: nothing is rejected
      st += target[i];
      sd += draft[i];
    }
    for (std::size_t i = 0; i < vocab; ++i) {
      target[i] /= st;
      draft[i] /= sd;
    }
    // P(out = x) = p_d(x) a(x) + P(reject) r(x), with P(reject) = 1 - sum_y p_d(y) a(y).
    const std::vector<double> residual = speculative_residual(target, draft);
    double accept_mass = 0.0;
    for (std::size_t x = 0; x < vocab; ++x) accept_mass += draft[x] * speculative_accept_probability(target, draft, static_cast<int>(x));
    for (std::size_t x = 0; x < vocab; ++x) {
      const double out = draft[x] * speculative_accept_probability(target, draft, static_cast<int>(x)) + (1.0 - accept_mass) * residual[x];
      INFO("trial " << trial << ", token " << x);
      CHECK(out == Approx(target[x]).margin(1e-6));
    }
  }
}

TEST_CASE("sampled speculation: seeded, reproducible, its counts consistent", "[model][speculative]") {
  SpeculativeModel& s = speculative_model();
  LlamaModel model(s.weights, 512, s.pool);
  const SpeculativeSampling sampling{1.0f, 42};
  SpeculativeDecodeStats a_stats, b_stats;
  KVCache a(cache_config(Format::F32, Format::F32)), b(cache_config(Format::F32, Format::F32));
  const LlamaDraft draft{LlamaDraft::Kind::Layers, 3, nullptr};
  const std::vector<int> first = generate_speculative(model, a, draft, {1}, 150, 4, &a_stats, sampling);
  const std::vector<int> second = generate_speculative(model, b, draft, {1}, 150, 4, &b_stats, sampling);
  CHECK(first == second);
  CHECK(a_stats.accepted > 0);
  CHECK(a_stats.accepted < a_stats.proposed);
  CHECK(a_stats.committed == a_stats.accepted + a_stats.verify_steps);
  const std::vector<int> other = generate_speculative(model, b, draft, {1}, 150, 4, nullptr, SpeculativeSampling{1.0f, 43});
  CHECK(other != first);
}

TEST_CASE("speculation refuses a draft that does not fit, before any work", "[model][speculative]") {
  SpeculativeModel& s = speculative_model();
  LlamaModel model(s.weights, 512, s.pool);
  KVCache cache(cache_config(Format::F32, Format::F32));
  const auto refused = [&](const LlamaDraft& draft, int k, const char* field) {
    try {
      generate_speculative(model, cache, draft, {1}, 20, k);
    } catch (const InputError& e) {
      CHECK(std::string(e.what()).find(field) != std::string::npos);
      CHECK(cache.stats().residual_pages == 0);
      return true;
    }
    return false;
  };
  CHECK(refused(LlamaDraft{LlamaDraft::Kind::Layers, 0, nullptr}, 4, "draft"));
  CHECK(refused(LlamaDraft{LlamaDraft::Kind::Layers, 5, nullptr}, 4, "draft"));
  CHECK(refused(LlamaDraft{LlamaDraft::Kind::Kv, 0, nullptr}, 4, "draft"));
  CHECK(refused(LlamaDraft{LlamaDraft::Kind::Kv, 0, &cache}, 4, "draft"));
  CHECK(refused(LlamaDraft{LlamaDraft::Kind::Layers, 2, nullptr}, 0, "k"));
  CHECK(refused(LlamaDraft{LlamaDraft::Kind::Layers, 2, nullptr}, kMaxVerifyQueries, "k"));
  CacheConfig wrong = cache_config(Format::Q2, Format::Q2);
  wrong.geometry.layers = 4;
  KVCache wrong_cache(wrong);
  CHECK(refused(LlamaDraft{LlamaDraft::Kind::Kv, 0, &wrong_cache}, 4, "geometry"));
}
