#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "attention/attention_ref.h"
#include "kv_cache.h"
#include "runtime/error.h"
#include "int_twin.h"
#include "test_support.h"

using namespace kv;

namespace {

CacheConfig config_for(Format f, int q_heads, int kv_heads, int dim, int page_tokens, int residual) {
  CacheConfig c;
  c.geometry = {2, q_heads, kv_heads, dim, 4096};
  c.k_format = f;
  c.v_format = f;
  c.page_tokens = page_tokens;
  c.residual_tokens = residual;
  c.threads = 2;
  return c;
}

struct Tokens {
  std::vector<float> k, v;
};

Tokens random_tokens(int n, int kv_heads, int dim, std::uint32_t seed) {
  return {kvtest::random_keys(n, kv_heads, dim, seed),
          kvtest::random_values(static_cast<std::size_t>(n) * kv_heads * dim, seed + 1)};
}

// Attention of the cache's stored values computed by the dense reference.
// Attention over the cache's stored values; where the cache's decode kernel takes integer dot
// products (q4 on SIMD paths), through their twin (int_twin.h).
std::vector<float> reference(KVCache& cache, SeqId seq, int layer, const std::vector<float>& q, int n_queries) {
  const ModelGeometry& g = cache.config().geometry;
  const AttentionShape shape{g.q_heads, g.kv_heads, g.head_dim, cache.config().softmax_scale};
  const auto views = cache.page_views(seq, layer);
  if (n_queries == 1 && kvtest::integer_decode(cache.isa(), views)) return kvtest::twin_decode(cache.isa(), shape, views, q.data());
  const DenseKV dense = gather_pages_ref(shape, views);
  std::vector<float> out(q.size());
  attention_ref(shape, q.data(), n_queries, dense.k.data(), dense.v.data(), dense.ctx, out.data());
  return out;
}

// The error allowed against reference().
float tolerance(KVCache& cache, SeqId seq, int layer, int n_queries) {
  return n_queries == 1 && kvtest::integer_decode(cache.isa(), cache.page_views(seq, layer)) ? kvtest::kTwinTolerance : 2e-5f;
}

std::vector<float> attend(KVCache& cache, SeqId seq, int layer, const std::vector<float>& q, int n_queries) {
  std::vector<float> out(q.size());
  cache.attend(seq, layer, q.data(), n_queries, out.data());
  return out;
}

std::size_t sealed_views(const KVCache& cache, SeqId seq, int layer) {
  std::size_t sealed = 0;
  const auto views = cache.page_views(seq, layer);
  for (const PageView& v : views[0]) sealed += v.layout == &cache.layout() ? 1 : 0;
  return sealed;
}

struct CountingSink : Telemetry {
  int sealed = 0, kernels = 0, with_reference = 0;
  std::uint64_t nan_inf = 0, bytes_read = 0, macs = 0;
  Isa last_isa = Isa::Auto;
  void on_page_sealed(const PageSealed& e) override {
    ++sealed;
    with_reference += e.health.has_reference ? 1 : 0;
  }
  void on_nan_inf(int, std::uint64_t count) override { nan_inf += count; }
  void on_kernel(KernelKind, Isa isa) override {
    ++kernels;
    last_isa = isa;
  }
  void on_ops(Phase, const OpCounts& ops) override {
    for (const auto& tier : ops.bytes_read)
      for (auto b : tier) bytes_read += b;
    for (auto m : ops.macs) macs += m;
  }
};

}  // namespace

TEST_CASE("An f32 cache reproduces exact attention on the raw tokens", "[engine]") {
  for (int residual : {0, 20}) {
    KVCache cache(config_for(Format::F32, 8, 1, 8, 16, residual));  // GQA 8, head_dim 8
    const SeqId seq = cache.create_sequence();
    const int ctx = 5 * 16 + 1;
    const Tokens t = random_tokens(ctx, 1, 8, 3);
    cache.append(seq, 0, t.k.data(), t.v.data(), ctx);
    const AttentionShape shape{8, 1, 8, cache.config().softmax_scale};
    for (int n : {1, 7}) {
      const auto q = kvtest::random_values(static_cast<std::size_t>(n) * 8 * 8, 4);
      std::vector<float> want(q.size());
      attention_ref(shape, q.data(), n, t.k.data(), t.v.data(), ctx, want.data());
      CAPTURE(residual, n);
      CHECK(kvtest::relative_error(attend(cache, seq, 0, q, n), want) < 2e-5f);
    }
  }
}

TEST_CASE("Quantized caches match the reference on their stored values", "[engine]") {
  std::uint32_t seed = 40;
  for (Format f : kAllFormats) {
    for (int residual : {0, 32}) {
      KVCache cache(config_for(f, 8, 2, 64, 16, residual));
      const SeqId seq = cache.create_sequence();
      const Tokens t = random_tokens(7 * 16 + 5, 2, 64, seed++);
      cache.append(seq, 1, t.k.data(), t.v.data(), 7 * 16 + 5);
      for (int n : {1, 20}) {
        const auto q = kvtest::random_values(static_cast<std::size_t>(n) * 8 * 64, seed++);
        CAPTURE(format_name(f), residual, n);
        CHECK(kvtest::relative_error(attend(cache, seq, 1, q, n), reference(cache, seq, 1, q, n)) < tolerance(cache, seq, 1, n));
      }
    }
  }
}

TEST_CASE("Pages seal when full and older than the residual", "[engine]") {
  KVCache eager(config_for(Format::Q4, 4, 2, 32, 16, 0));
  SeqId a = eager.create_sequence();
  Tokens t = random_tokens(70, 2, 32, 1);
  eager.append(a, 0, t.k.data(), t.v.data(), 15);
  CHECK(sealed_views(eager, a, 0) == 0);  // the open page stays full precision
  eager.append(a, 0, t.k.data() + 15 * 64, t.v.data() + 15 * 64, 1);
  CHECK(sealed_views(eager, a, 0) == 1);  // sealed the moment it fills

  KVCache lazy(config_for(Format::Q4, 4, 2, 32, 16, 32));
  SeqId b = lazy.create_sequence();
  lazy.append(b, 0, t.k.data(), t.v.data(), 70);
  CHECK(sealed_views(lazy, b, 0) == 2);  // (70 - 32) / 16 pages are older than the residual
  CHECK(lazy.page_views(b, 0)[0].size() == 2 + 3);
  CHECK(lazy.length(b, 0) == 70);
  CHECK(lazy.length(b, 1) == 0);
}

TEST_CASE("Truncate inside the residual is exact", "[engine]") {
  const Tokens t = random_tokens(60, 2, 32, 8);
  const Tokens other = random_tokens(10, 2, 32, 9);
  KVCache cache(config_for(Format::Q4, 4, 2, 32, 16, 64));
  const SeqId seq = cache.create_sequence();
  cache.append(seq, 0, t.k.data(), t.v.data(), 60);
  cache.truncate(seq, 40);
  CHECK(cache.length(seq, 0) == 40);
  cache.append(seq, 0, other.k.data(), other.v.data(), 10);

  KVCache fresh(config_for(Format::Q4, 4, 2, 32, 16, 64));
  const SeqId f = fresh.create_sequence();
  fresh.append(f, 0, t.k.data(), t.v.data(), 40);
  fresh.append(f, 0, other.k.data(), other.v.data(), 10);
  const auto q = kvtest::random_values(4 * 32, 10);
  CHECK(attend(cache, seq, 0, q, 1) == attend(fresh, f, 0, q, 1));
}

TEST_CASE("Truncate into a sealed page keeps that page's stored values", "[engine]") {
  KVCache cache(config_for(Format::Q2, 4, 2, 32, 16, 0));
  const SeqId seq = cache.create_sequence();
  const Tokens t = random_tokens(40, 2, 32, 12);
  cache.append(seq, 0, t.k.data(), t.v.data(), 40);
  const AttentionShape shape{4, 2, 32, 1.0f};
  const DenseKV before = gather_pages_ref(shape, cache.page_views(seq, 0));
  cache.truncate(seq, 20);
  const DenseKV after = gather_pages_ref(shape, cache.page_views(seq, 0));
  REQUIRE(after.ctx == 20);
  CHECK(sealed_views(cache, seq, 0) == 1);
  CHECK(std::equal(after.k.begin(), after.k.end(), before.k.begin()));
  CHECK(std::equal(after.v.begin(), after.v.end(), before.v.begin()));
  CHECK_THROWS_AS(cache.truncate(seq, 21), InputError);
}

TEST_CASE("A fork shares pages and its writes never show in the parent", "[engine]") {
  KVCache cache(config_for(Format::Q4, 4, 2, 32, 16, 8));
  const SeqId parent = cache.create_sequence();
  const Tokens t = random_tokens(50, 2, 32, 20);
  for (int layer = 0; layer < 2; ++layer) cache.append(parent, layer, t.k.data(), t.v.data(), 50);
  const auto q = kvtest::random_values(4 * 32, 21);
  const auto parent_before = attend(cache, parent, 0, q, 1);
  const std::size_t sealed_before = cache.stats().sealed_pages;

  const SeqId child = cache.fork(parent);
  CHECK(cache.stats().sealed_pages == sealed_before);  // shared, not copied
  CHECK(attend(cache, child, 0, q, 1) == parent_before);
  const Tokens more = random_tokens(30, 2, 32, 22);
  cache.append(child, 0, more.k.data(), more.v.data(), 30);
  cache.truncate(child, 10);
  cache.append(child, 0, more.k.data(), more.v.data(), 30);
  CHECK(cache.length(parent, 0) == 50);
  CHECK(attend(cache, parent, 0, q, 1) == parent_before);
  cache.release(parent);
  CHECK(cache.length(child, 0) == 40);
  CHECK(kvtest::relative_error(attend(cache, child, 0, q, 1), reference(cache, child, 0, q, 1)) < tolerance(cache, child, 0, 1));
  cache.release(child);
  CHECK(cache.stats().sealed_pages == 0);
  CHECK(cache.stats().residual_pages == 0);
}

TEST_CASE("Non-finite inputs are replaced by 0 and counted", "[engine]") {
  CountingSink sink;
  KVCache cache(config_for(Format::F32, 2, 1, 8, 16, 0), &sink);
  const SeqId seq = cache.create_sequence();
  Tokens t = random_tokens(3, 1, 8, 30);
  t.k[2] = std::numeric_limits<float>::quiet_NaN();
  t.v[9] = std::numeric_limits<float>::infinity();
  t.v[10] = -std::numeric_limits<float>::infinity();
  cache.append(seq, 0, t.k.data(), t.v.data(), 3);
  CHECK(cache.stats().nan_inf_replaced == 3);
  CHECK(sink.nan_inf == 3);
  const DenseKV dense = gather_pages_ref({2, 1, 8, 1.0f}, cache.page_views(seq, 0));
  CHECK(dense.k[2] == 0.0f);
  CHECK(dense.v[9] == 0.0f);
  const auto q = kvtest::random_values(2 * 8, 31);
  for (float x : attend(cache, seq, 0, q, 1)) CHECK(std::isfinite(x));
}

TEST_CASE("Decode output is bit-identical whatever the thread count", "[engine]") {
  const Tokens t = random_tokens(1000, 4, 64, 40);
  const auto q = kvtest::random_values(16 * 64, 41);
  std::vector<float> first;
  for (int threads : {1, 2, 4}) {
    CacheConfig c = config_for(Format::Q4, 16, 4, 64, 32, 16);
    c.threads = threads;
    c.split_pages = 2;
    KVCache cache(c);
    const SeqId seq = cache.create_sequence();
    cache.append(seq, 0, t.k.data(), t.v.data(), 1000);
    auto out = attend(cache, seq, 0, q, 1);
    if (first.empty()) first = out;
    CAPTURE(threads);
    CHECK(std::memcmp(first.data(), out.data(), out.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("Every ISA path gives the same attention through the cache", "[engine]") {
  const Tokens t = random_tokens(300, 2, 128, 50);
  const auto q = kvtest::random_values(8 * 128, 51);
  std::vector<float> scalar_out;
  for (Isa isa : kvtest::tested_isas()) {
    CacheConfig c = config_for(Format::Q4, 8, 2, 128, 64, 32);
    c.isa = isa;
    KVCache cache(c);
    CHECK(cache.isa() == isa);
    const SeqId seq = cache.create_sequence();
    cache.append(seq, 0, t.k.data(), t.v.data(), 300);
    const auto out = attend(cache, seq, 0, q, 1);
    if (scalar_out.empty()) scalar_out = out;
    CAPTURE(isa_name(isa));
    if (kvtest::integer_decode(isa, cache.page_views(seq, 0))) {  // q4 integer dot products (int_dot.h)
      CHECK(kvtest::relative_error(out, reference(cache, seq, 0, q, 1)) < kvtest::kTwinTolerance);
      CHECK(kvtest::relative_error(out, scalar_out) < 0.05f);
    } else {
      CHECK(kvtest::relative_error(out, scalar_out) < 2e-5f);
    }
  }
}

TEST_CASE("Telemetry reports sealed pages, kernel path and operation counts", "[engine]") {
  CountingSink sink;
  KVCache cache(config_for(Format::Q8, 4, 2, 32, 16, 0), &sink);
  const SeqId seq = cache.create_sequence();
  const Tokens t = random_tokens(64, 2, 32, 60);
  cache.append(seq, 0, t.k.data(), t.v.data(), 48);
  cache.set_phase(Phase::Decode);
  cache.append(seq, 0, t.k.data() + 48 * 64, t.v.data() + 48 * 64, 16);
  CHECK(sink.sealed == 4 * 2);
  CHECK(sink.with_reference == 3 * 2);  // every page but each head's first
  const auto q = kvtest::random_values(4 * 32, 61);
  attend(cache, seq, 0, q, 1);
  CHECK(sink.kernels == 1);
  CHECK(sink.last_isa == cache.isa());
  CHECK(sink.macs == 2ull * 64 * 4 * 32);
  CHECK(sink.bytes_read >= 2ull * 4 * cache.layout().k_read_bytes(16));
}

TEST_CASE("Bad arguments get clear errors", "[engine]") {
  KVCache cache(config_for(Format::Q4, 4, 2, 32, 16, 0));
  const SeqId seq = cache.create_sequence();
  const Tokens t = random_tokens(4, 2, 32, 70);
  std::vector<float> q(4 * 32), out(q.size());
  CHECK_THROWS_WITH(cache.append(seq, 2, t.k.data(), t.v.data(), 4), Catch::Contains("layer"));
  CHECK_THROWS_WITH(cache.append(seq + 9, 0, t.k.data(), t.v.data(), 4), Catch::Contains("unknown sequence"));
  CHECK_THROWS_WITH(cache.attend(seq, 0, q.data(), 1, out.data()), Catch::Contains("n_queries"));
  cache.append(seq, 0, t.k.data(), t.v.data(), 4);
  CHECK_THROWS_WITH(cache.attend(seq, 0, q.data(), 5, out.data()), Catch::Contains("n_queries"));
  CHECK_THROWS_WITH(cache.append(seq, 0, t.k.data(), t.v.data(), -1), Catch::Contains("n_tokens"));
  std::vector<float> big(static_cast<std::size_t>(4096) * 2 * 32);
  CHECK_THROWS_WITH(cache.append(seq, 0, big.data(), big.data(), 4096), Catch::Contains("max_seq"));
  CHECK(cache.length(seq, 0) == 4);  // a refused append changes nothing

  CacheConfig c = config_for(Format::Q4, 4, 2, 32, 16, 0);
  c.page_tokens = 300;
  CHECK_THROWS_WITH(KVCache(c), Catch::Contains("page_tokens"));
  c = config_for(Format::Q4, 4, 0, 32, 16, 0);
  CHECK_THROWS_WITH(KVCache(c), Catch::Contains("kv_heads"));
  c = config_for(Format::Q4, 4, 2, 32, 16, -1);
  CHECK_THROWS_WITH(KVCache(c), Catch::Contains("residual_tokens"));
  c = config_for(Format::Q4, 4, 2, 32, 16, 0);
  c.threads = -2;
  CHECK_THROWS_WITH(KVCache(c), Catch::Contains("threads"));
}
