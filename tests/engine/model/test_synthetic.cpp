#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "model/synthetic.h"
#include "attention/attention_ref.h"
#include "model/synthetic_stats.h"
#include "runtime/error.h"

using namespace kv;

namespace {

SyntheticConfig config_at(int ctx) {
  SyntheticConfig c;
  c.calibration_ctx = ctx;
  c.needles = {ctx / 10, ctx / 2};
  return c;
}

}  // namespace

TEST_CASE("Presets carry the public geometries", "[model]") {
  const SyntheticPreset& llama = find_synthetic_preset("llama-7b-gqa", "test");
  CHECK((llama.layers == 32 && llama.q_heads == 32 && llama.kv_heads == 8 && llama.head_dim == 128));
  CHECK(llama.rope_theta == 10000.0);
  CHECK(llama.max_seq == 32768);
  CHECK(llama.max_seq_long == 131072);
  // Mistral-7B: 7.24B parameters, of which the embedding table (32000 x 4096) is only read.
  CHECK(llama.non_attention_macs_per_token() == 32ull * (4096ull * 4096 * 2 + 2ull * 4096 * 1024 + 3ull * 4096 * 14336) +
                                                     4096ull * 32000);
  CHECK(find_synthetic_preset("qwen-1.5b-gqa", "t").kv_heads == 2);
  CHECK(find_synthetic_preset("qwen-0.5b-gqa", "t").head_dim == 64);
  CHECK_THROWS_WITH(find_synthetic_preset("gpt-5", "suite.json"), Catch::Contains("suite.json") && Catch::Contains("gpt-5"));
}

TEST_CASE("The generator is deterministic and regenerates any position", "[model]") {
  ThreadPool pool(2);
  const SyntheticPreset& preset = find_synthetic_preset("qwen-0.5b-gqa", "test");
  SyntheticModel a(preset, config_at(2048), {0, 12}, 4096, pool);
  SyntheticModel b(preset, config_at(2048), {0, 12}, 4096, pool);
  SyntheticConfig other = config_at(2048);
  other.seed = 2;
  SyntheticModel c(preset, other, {0, 12}, 4096, pool);
  CHECK(a.geometry().layers == 2);
  CHECK(a.extrapolated());
  const int n = 5, pos = 100;
  const ModelGeometry& g = a.geometry();
  std::vector<float> q(n * g.q_heads * g.head_dim), k(n * g.kv_heads * g.head_dim), v(k.size());
  std::vector<float> q2(q.size()), k2(k.size()), v2(v.size());
  a.begin_step(nullptr, n, pos);
  a.layer_qkv(1, q.data(), k.data(), v.data());
  b.begin_step(nullptr, n, pos);
  b.layer_qkv(1, q2.data(), k2.data(), v2.data());
  CHECK(std::memcmp(q.data(), q2.data(), q.size() * 4) == 0);
  CHECK(std::memcmp(k.data(), k2.data(), k.size() * 4) == 0);
  CHECK(std::memcmp(v.data(), v2.data(), v.size() * 4) == 0);
  // Stateless regeneration of (layer 12, kv head 1, position 103) equals what the step made.
  std::vector<float> key(g.head_dim), value(g.head_dim);
  a.key(12, 1, pos + 3, key.data());
  a.value(12, 1, pos + 3, value.data());
  CHECK(std::memcmp(key.data(), k.data() + (3 * g.kv_heads + 1) * g.head_dim, key.size() * 4) == 0);
  CHECK(std::memcmp(value.data(), v.data() + (3 * g.kv_heads + 1) * g.head_dim, value.size() * 4) == 0);
  c.begin_step(nullptr, n, pos);
  c.layer_qkv(1, q2.data(), k2.data(), v2.data());
  CHECK(std::memcmp(k.data(), k2.data(), k.size() * 4) != 0);  // another seed, other tensors
  const NonAttentionCost cost = a.non_attention_per_token();
  CHECK(cost.weight_bytes == 2 * cost.macs);
}

TEST_CASE("Synthetic keys and values are a function of the tokens up to their position", "[model][prefix]") {
  ThreadPool pool(2);
  const SyntheticPreset& preset = find_synthetic_preset("qwen-0.5b-gqa", "test");
  const int n = 64;
  std::vector<int> first(n), second(n);
  for (int i = 0; i < n; ++i) first[static_cast<std::size_t>(i)] = second[static_cast<std::size_t>(i)] = 1000 + i;
  second[40] = 7;  // one token differs
  for (const SyntheticStatistics statistics : {SyntheticStatistics::Published, SyntheticStatistics::UniformHeads}) {
    CAPTURE(statistics_name(statistics));
    SyntheticConfig config = config_at(2048);
    config.statistics = statistics;
    SyntheticModel a(preset, config, {0, 12}, 256, pool);
    SyntheticModel b(preset, config, {0, 12}, 256, pool);
    a.begin_step(first.data(), n, 0);
    b.begin_step(second.data(), n, 0);
    const int dim = preset.head_dim;
    std::vector<float> ka(dim), kb(dim), va(dim), vb(dim);
    const auto same_at = [&](int pos) {
      a.key(12, 1, pos, ka.data());
      b.key(12, 1, pos, kb.data());
      a.value(12, 1, pos, va.data());
      b.value(12, 1, pos, vb.data());
      return std::memcmp(ka.data(), kb.data(), ka.size() * 4) == 0 && std::memcmp(va.data(), vb.data(), va.size() * 4) == 0;
    };
    for (int pos = 0; pos < 40; ++pos) CHECK(same_at(pos));  // the same tokens up to here
    for (int pos = 40; pos < n; ++pos) {
      // The published statistics' K/V follow the tokens; the uniform heads keep definitions 1-3's, by position.
      CHECK(same_at(pos) == (statistics == SyntheticStatistics::UniformHeads));
    }
    // A prefix that came from the prefix cache sets the same context as the steps that made it.
    SyntheticModel c(preset, config, {0, 12}, 256, pool);
    c.reuse_prefix(second.data(), 48);
    c.begin_step(second.data() + 48, n - 48, 48);
    for (int pos = 0; pos < n; ++pos) CHECK(c.token_context(pos) == b.token_context(pos));
  }
}

TEST_CASE("The uniform-heads statistics sit in their documented ranges", "[model]") {
  ThreadPool pool(2);
  struct Case { const char* preset; int ctx; };
  for (Case tc : {Case{"qwen-0.5b-gqa", 4096}, Case{"llama-7b-gqa", 8192}}) {
    const SyntheticPreset& preset = find_synthetic_preset(tc.preset, "test");
    SyntheticConfig config = config_at(tc.ctx);
    config.statistics = SyntheticStatistics::UniformHeads;
    SyntheticModel model(preset, config, {0, preset.layers / 2}, tc.ctx + 8, pool);
    const SyntheticStats s = measure_synthetic(model, {tc.ctx, 4, 0}, pool);
    CAPTURE(tc.preset, s.sink_mass, s.window_mass, s.heavy_mass, s.tail_mass, s.query_cosine, s.outlier_gain);
    // The documented "about" ranges (sinks 20-30%, window 30-40%, heavy hitters about 20%),
    // with 0.02 of slack for the context and the seed.
    CHECK(s.sink_mass >= 0.18);
    CHECK(s.sink_mass <= 0.32);
    CHECK(s.window_mass >= 0.28);
    CHECK(s.window_mass <= 0.42);
    CHECK(s.heavy_mass >= 0.15);
    CHECK(s.heavy_mass <= 0.25);
    CHECK(s.heavy_token_share == Approx(0.01).margin(0.002));
    CHECK(s.query_cosine == Approx(0.9).margin(0.02));
    CHECK(s.outlier_gain_min >= 9.0);   // 10-20x by construction; the typical |k| is estimated
    CHECK(s.outlier_gain_max <= 22.0);
    CHECK(s.needles == 2);
    CHECK(s.needle_top1 >= 0.95);       // a question finds its needle
    CHECK(s.needle_mass >= 0.5);
  }
}

TEST_CASE("Impossible synthetic configurations are refused", "[model]") {
  const SyntheticPreset& preset = find_synthetic_preset("qwen-0.5b-gqa", "test");
  ThreadPool pool(1);
  auto with = [&](auto change) {
    SyntheticConfig c;
    c.statistics = SyntheticStatistics::UniformHeads;
    change(c);
    return c;
  };
  CHECK_THROWS_WITH(SyntheticModel(preset, with([](auto& c) { c.sink_mass = 0.6f; }), {}, 1024, pool),
                    Catch::Contains("sink_mass"));
  CHECK_THROWS_WITH(SyntheticModel(preset, with([](auto& c) { c.heavy_fraction = 0.0f; }), {}, 1024, pool),
                    Catch::Contains("heavy_fraction"));
  CHECK_THROWS_WITH(SyntheticModel(preset, with([](auto& c) { c.needles = {2}; }), {}, 1024, pool),
                    Catch::Contains("needles"));
  CHECK_THROWS_WITH(SyntheticModel(preset, with([](auto&) {}), {24}, 1024, pool), Catch::Contains("sample_layers"));
  CHECK_THROWS_WITH(SyntheticModel(preset, with([](auto& c) { c.query_similarity = 1.0f; }), {}, 1024, pool),
                    Catch::Contains("query_similarity"));
}

TEST_CASE("The synthetic backend drives the KV cache through run_step", "[model]") {
  ThreadPool pool(2);
  const SyntheticPreset& preset = find_synthetic_preset("qwen-0.5b-gqa", "test");
  SyntheticModel model(preset, config_at(1024), {3}, 1024, pool);
  CacheConfig c;
  c.geometry = model.geometry();
  c.k_format = Format::Q4;
  c.v_format = Format::Q4;
  c.threads = 2;
  KVCache cache(c);
  const SeqId seq = cache.create_sequence();
  StepBuffers buffers;
  run_step(model, cache, seq, nullptr, 512, 0, buffers);  // a prefill chunk
  for (int pos = 512; pos < 520; ++pos) run_step(model, cache, seq, nullptr, 1, pos, buffers);
  CHECK(cache.length(seq, 0) == 520);
  for (float x : buffers.attn) REQUIRE(std::isfinite(x));
}

TEST_CASE("Append-only steps write the same K/V without attention", "[model]") {
  ThreadPool pool(2);
  const SyntheticPreset& preset = find_synthetic_preset("qwen-0.5b-gqa", "test");
  SyntheticModel model(preset, config_at(1024), {1, 5}, 1024, pool);
  CacheConfig c;
  c.geometry = model.geometry();
  c.k_format = Format::Q8;
  c.v_format = Format::Q8;
  c.threads = 2;
  KVCache full(c), sampled(c);
  const SeqId a = full.create_sequence(), b = sampled.create_sequence();
  StepBuffers buffers;
  run_step(model, full, a, nullptr, 300, 0, buffers);
  run_step(model, sampled, b, nullptr, 300, 0, buffers, StepAttention::AppendOnly);
  const AttentionShape shape{preset.q_heads, preset.kv_heads, preset.head_dim, 1.0f};
  for (int layer = 0; layer < 2; ++layer) {
    const DenseKV x = gather_pages_ref(shape, full.page_views(a, layer));
    const DenseKV y = gather_pages_ref(shape, sampled.page_views(b, layer));
    CHECK(x.k == y.k);
    CHECK(x.v == y.v);
  }
}
