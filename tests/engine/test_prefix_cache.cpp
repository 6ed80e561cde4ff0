// The prefix cache through the KV cache: a later prompt shares the whole pages an earlier one
// sealed, prefills only the rest, and attends exactly as if it had prefilled everything.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kv_cache.h"
#include "runtime/error.h"
#include "test_support.h"

using namespace kv;

namespace {

constexpr int kLayers = 2, kQHeads = 4, kKvHeads = 2, kDim = 32, kPageTokens = 16;

CacheConfig prefix_config(Format format, int residual_tokens) {
  CacheConfig c;
  c.geometry = {kLayers, kQHeads, kKvHeads, kDim, 1024};
  c.k_format = format;
  c.v_format = format;
  c.page_tokens = kPageTokens;
  c.residual_tokens = residual_tokens;
  c.threads = 2;
  c.prefix_cache = true;
  return c;
}

// K or V rows [count][kv_heads][head_dim] of tokens[first..first+count): a function of the token
// id, the position and the layer, as a model's K/V are of what it has read (here only the token
// itself: enough for equal prefixes to give equal rows).
std::vector<float> rows(const std::vector<TokenId>& tokens, int first, int count, int layer, bool keys) {
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(count) * kKvHeads * kDim);
  for (int p = first; p < first + count; ++p) {
    std::mt19937 rng(static_cast<std::uint32_t>(tokens[static_cast<std::size_t>(p)] * 7919 + p * 31 + layer * 3 + (keys ? 1 : 0)));
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int i = 0; i < kKvHeads * kDim; ++i) out.push_back(normal(rng) + (keys && i % kDim == 3 ? 4.0f : 0.0f));
  }
  return out;
}

void append(KVCache& cache, SeqId seq, const std::vector<TokenId>& tokens, int first, int count) {
  for (int l = 0; l < kLayers; ++l) {
    const auto k = rows(tokens, first, count, l, true), v = rows(tokens, first, count, l, false);
    cache.append(seq, l, k.data(), v.data(), count);
  }
}

// Every layer's attention output for one query at the sequence's end.
std::vector<float> attend_all(KVCache& cache, SeqId seq) {
  std::vector<float> outputs;
  const auto q = kvtest::random_values(static_cast<std::size_t>(kQHeads) * kDim, 17);
  std::vector<float> out(q.size());
  for (int l = 0; l < kLayers; ++l) {
    cache.attend(seq, l, q.data(), 1, out.data());
    outputs.insert(outputs.end(), out.begin(), out.end());
  }
  return outputs;
}

std::vector<TokenId> prompt(int count, TokenId first) {
  std::vector<TokenId> t(static_cast<std::size_t>(count));
  std::iota(t.begin(), t.end(), first);
  return t;
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("a second prompt shares the first one's whole pages, prefills only its suffix and attends bit-identically",
          "[prefix][kv_cache]") {
  const Format format = GENERATE(Format::F16, Format::Q8, Format::Q4);
  const int residual = GENERATE(0, 32);
  CAPTURE(format_name(format), residual);
  const auto first = prompt(200, 1000);
  auto second = prompt(160, 1000);  // the first 160 tokens, then its own 40
  for (TokenId t : prompt(40, 5000)) second.push_back(t);

  KVCache cache(prefix_config(format, residual));
  const SeqId a = cache.create_sequence();
  append(cache, a, first, 0, 200);
  const std::size_t sealed = static_cast<std::size_t>((200 - residual) / kPageTokens);
  CHECK(cache.cache_prefix(a, first) == sealed);
  CHECK(cache.cache_prefix(a, first) == 0);  // cached already

  const PrefixPlan plan = cache.lookup_prefix(second);
  REQUIRE(plan.pages() == std::min<int>(10, static_cast<int>(sealed)));  // 160 tokens: 10 whole pages
  const SeqId b = cache.create_sequence();
  cache.share_prefix(b, plan);
  CHECK(cache.length(b, 0) == plan.tokens());
  append(cache, b, second, plan.tokens(), 200 - plan.tokens());  // only the suffix
  const auto shared = attend_all(cache, b);

  KVCache alone(prefix_config(format, residual));
  const SeqId c = alone.create_sequence();
  append(alone, c, second, 0, 200);
  REQUIRE(bit_identical(shared, attend_all(alone, c)));

  // The shared pages are held once: the two sequences own fewer physical pages than two prefills.
  const std::size_t per_position = kLayers * kKvHeads;
  CHECK(alone.stats().sealed_pages == sealed * per_position);
  CHECK(cache.stats().sealed_pages == (2 * sealed - static_cast<std::size_t>(plan.pages())) * per_position);
  const PrefixStats stats = cache.prefix_stats();
  CHECK(stats.lookups == 1);
  CHECK(stats.hit_tokens == static_cast<std::uint64_t>(plan.tokens()));
  CHECK(stats.looked_up_tokens == 200);
  CHECK(stats.entries == sealed);
}

TEST_CASE("references return to zero when every sequence ends and the cache lets go", "[prefix][kv_cache]") {
  KVCache cache(prefix_config(Format::Q4, 32));
  const auto tokens = prompt(300, 7);
  const SeqId a = cache.create_sequence();
  append(cache, a, tokens, 0, 300);
  const std::size_t cached = cache.cache_prefix(a, tokens);
  REQUIRE(cached == (300 - 32) / kPageTokens);
  const SeqId b = cache.create_sequence();
  cache.share_prefix(b, cache.lookup_prefix(tokens));
  const SeqId fork = cache.fork(b);
  cache.release(a);
  cache.release(b);
  cache.release(fork);
  // Only the cache holds pages now: one per layer, kv head and cached position.
  CHECK(cache.stats().sealed_pages == cached * kLayers * kKvHeads);
  CHECK(cache.evict_prefixes(1000) == cached);
  CHECK(cache.stats().sealed_pages == 0);
  CHECK(cache.prefix_stats().entries == 0);
  CHECK(cache.prefix_stats().cached_bytes == 0);
}

TEST_CASE("a sequence that truncates into a shared page keeps its own copy and the other stays unchanged", "[prefix][kv_cache]") {
  KVCache cache(prefix_config(Format::Q8, 0));
  const auto tokens = prompt(128, 40);
  const SeqId a = cache.create_sequence();
  append(cache, a, tokens, 0, 128);
  cache.cache_prefix(a, tokens);
  const SeqId b = cache.create_sequence();
  cache.share_prefix(b, cache.lookup_prefix(tokens));
  REQUIRE(cache.length(b, 0) == 128);
  const auto before = attend_all(cache, a);
  cache.truncate(b, 100);  // inside shared page 6
  auto other = prompt(100, 40);
  for (TokenId t : prompt(28, 9000)) other.push_back(t);
  append(cache, b, other, 100, 28);
  CHECK(bit_identical(before, attend_all(cache, a)));
  // A fresh sequence still finds the whole cached prompt.
  CHECK(cache.lookup_prefix(tokens).pages() == 8);
}

TEST_CASE("the prefix cache refuses a non-empty sequence and does nothing when off", "[prefix][kv_cache]") {
  KVCache cache(prefix_config(Format::F16, 0));
  const auto tokens = prompt(64, 1);
  const SeqId a = cache.create_sequence();
  append(cache, a, tokens, 0, 64);
  cache.cache_prefix(a, tokens);
  const SeqId b = cache.create_sequence();
  append(cache, b, tokens, 0, 1);
  CHECK_THROWS_MATCHES(cache.share_prefix(b, cache.lookup_prefix(tokens)), InputError,
                       Catch::Predicate<InputError>([](const InputError& e) {
                         return e.where() == "KVCache::share_prefix" && e.field() == "seq";
                       }));
  CacheConfig off = prefix_config(Format::F16, 0);
  off.prefix_cache = false;
  KVCache plain(off);
  const SeqId c = plain.create_sequence();
  append(plain, c, tokens, 0, 64);
  CHECK(plain.cache_prefix(c, tokens) == 0);
  CHECK(plain.lookup_prefix(tokens).pages() == 0);
}

TEST_CASE("cached pages demoted to L2 come back intact for a later prompt", "[prefix][kv_cache][memory]") {
  kvtest::TempDir dir("prefix-l2");
  CacheConfig config = prefix_config(Format::Q4, 0);
  config.memory.l1_bytes = 96u << 10;  // a few dozen q4 pages: the cached prompt goes to L2
  config.memory.l0_bytes = 32u << 10;
  config.memory.l2.dir = dir.path;
  config.memory.l2.segment_bytes = 4u << 20;
  config.memory.l2.batch_bytes = 64u << 10;
  config.memory.pin_sink_tokens = 0;
  config.memory.pin_window_tokens = 16;
  KVCache cache(config);
  const auto tokens = prompt(512, 3);
  const SeqId a = cache.create_sequence();
  append(cache, a, tokens, 0, 512);
  cache.cache_prefix(a, tokens);
  cache.release(a);
  // Another prompt pushes the cached pages out of L1.
  const SeqId filler = cache.create_sequence();
  append(cache, filler, prompt(512, 70000), 0, 512);
  CHECK(cache.stats().memory.swap_out_bytes > 0);
  const SeqId b = cache.create_sequence();
  const PrefixPlan plan = cache.lookup_prefix(tokens);
  REQUIRE(plan.pages() == 32);
  cache.share_prefix(b, plan);
  const auto shared = attend_all(cache, b);
  CHECK(cache.stats().memory.swap_in_bytes > 0);

  CacheConfig plain = prefix_config(Format::Q4, 0);
  plain.prefix_cache = false;
  KVCache alone(plain);
  const SeqId c = alone.create_sequence();
  append(alone, c, tokens, 0, 512);
  CHECK(bit_identical(shared, attend_all(alone, c)));
}
