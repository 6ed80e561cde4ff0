// The prefix cache through the KV cache: a later prompt shares the whole pages an earlier one
// sealed, prefills only the rest, and attends exactly as if it had prefilled everything.
#include <catch2/catch.hpp>

#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kv_cache.h"
#include "runtime/error.h"
#include "test_support.h"

using namespace kv;

using kvtest::bit_identical;

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

// A tight L1 over an L2 in `dir`: cached and shared pages move to L2 and back, checksums verified.
void with_tiers(CacheConfig& c, const std::string& dir, std::size_t l1_bytes) {
  c.memory.l1_bytes = l1_bytes;
  c.memory.l0_bytes = 32u << 10;
  c.memory.l2.dir = dir;
  c.memory.l2.segment_bytes = 4u << 20;
  c.memory.l2.batch_bytes = 64u << 10;
  c.memory.pin_sink_tokens = 0;
  c.memory.pin_window_tokens = 16;
}

// K or V rows [count][kv_heads][head_dim] of tokens[first..first+count): a function of the token
// id, the position and the layer, as a model's K/V are of what it has read (here only the token
// itself: enough for equal prefixes to give equal rows).
std::vector<float> rows(const std::vector<TokenId>& tokens, int first, int count, int layer, bool keys) {
  std::vector<float> out;
  out.reserve(static_cast<std::size_t>(count) * kKvHeads * kDim);
  for (int p = first; p < first + count; ++p) {
    // Unsigned: token ids reach 2^20 and more, whose product would overflow an int.
    const auto token = static_cast<std::uint32_t>(tokens[static_cast<std::size_t>(p)]);
    std::mt19937 rng(token * 7919u + static_cast<std::uint32_t>(p) * 31u + static_cast<std::uint32_t>(layer) * 3u + (keys ? 1u : 0u));
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

// A prompt of `tokens` prefilled, cached and ended; then another prompt of the same length that
// pushes the cached pages out of a tight L1. Returns that other sequence.
SeqId cache_then_push_out(KVCache& cache, const std::vector<TokenId>& tokens) {
  const int n = static_cast<int>(tokens.size());
  const SeqId a = cache.create_sequence();
  append(cache, a, tokens, 0, n);
  cache.cache_prefix(a, tokens);
  cache.release(a);
  const SeqId filler = cache.create_sequence();
  append(cache, filler, prompt(n, 70000), 0, n);
  return filler;
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
  with_tiers(config, dir.path, 96u << 10);  // a few dozen q4 pages: the cached prompt goes to L2
  KVCache cache(config);
  const auto tokens = prompt(512, 3);
  cache_then_push_out(cache, tokens);
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

TEST_CASE("reset_counters: a warm-up's cached pages stay, its counters and peaks do not", "[prefix][kv_cache][memory]") {
  kvtest::TempDir dir("prefix-warm");
  CacheConfig config = prefix_config(Format::Q4, 0);
  with_tiers(config, dir.path, 96u << 10);
  KVCache cache(config);
  const auto tokens = prompt(512, 3);
  cache.release(cache_then_push_out(cache, tokens));  // the warm-up
  const CacheStats warm = cache.stats();
  REQUIRE(warm.memory.swap_out_bytes > 0);
  REQUIRE(warm.memory.l2_bytes_written > 0);
  cache.reset_counters();
  const CacheStats reset = cache.stats();
  // The pages and where they live stay; what the warm-up moved and sealed is not counted.
  CHECK(reset.sealed_pages == warm.sealed_pages);
  CHECK(reset.memory.l2_live_bytes == warm.memory.l2_live_bytes);
  CHECK(reset.memory.swap_out_bytes == 0);
  CHECK(reset.memory.swap_in_bytes == 0);
  CHECK(reset.memory.demotions == 0);
  CHECK(reset.memory.l2_bytes_written == 0);
  CHECK(reset.memory.pages_read == 0);
  CHECK(reset.peak_sealed_bytes == reset.sealed_bytes);
  CHECK(reset.peak_sealed_bytes < warm.peak_sealed_bytes);
  CHECK(reset.memory.peak_l1_bytes == reset.memory.l1_used_bytes);
  CHECK(reset.memory.peak_l2_bytes <= warm.memory.peak_l2_bytes);
  const PrefixStats prefix = cache.prefix_stats();
  CHECK(prefix.lookups == 0);
  CHECK(prefix.inserted_pages == 0);
  CHECK(prefix.entries == 32);  // the cached prompt's pages
  // The measured part finds the warm-up's prompt and counts only its own work.
  const SeqId b = cache.create_sequence();
  const PrefixPlan plan = cache.lookup_prefix(tokens);
  REQUIRE(plan.pages() == 32);
  cache.share_prefix(b, plan);
  attend_all(cache, b);
  CHECK(cache.prefix_stats().lookups == 1);
  CHECK(cache.prefix_stats().hit_tokens == 512);
  CHECK(cache.stats().memory.swap_in_bytes > 0);  // the cached pages came back from L2
}

TEST_CASE("a closed telemetry gate passes nothing on and an open one passes everything", "[kv_cache]") {
  struct Counting final : Telemetry {
    int seen = 0;
    void on_page_sealed(const PageSealed&) override { ++seen; }
    void on_nan_inf(int, std::uint64_t) override { ++seen; }
    void on_kernel(KernelKind, Isa) override { ++seen; }
    void on_ops(Phase, const OpCounts&) override { ++seen; }
  };
  Counting counting;
  TelemetryGate gate(&counting);
  KVCache cache(prefix_config(Format::Q4, 0), &gate);
  const auto tokens = prompt(64, 1);
  gate.set_open(false);
  const SeqId a = cache.create_sequence();
  append(cache, a, tokens, 0, 64);
  attend_all(cache, a);
  CHECK(counting.seen == 0);
  gate.set_open(true);
  attend_all(cache, a);
  CHECK(counting.seen > 0);
}

TEST_CASE("random requests, forks, truncates, decodes, ends and evictions keep every reference and byte accounted for",
          "[prefix][kv_cache]") {
#if defined(__SANITIZE_ADDRESS__)
  constexpr int kOps = 1000;  // the sanitizer build runs the same sequence, shorter
#else
  constexpr int kOps = 10000;
#endif
  const bool tiers = GENERATE(false, true);
  CAPTURE(tiers);
  kvtest::TempDir dir("prefix-property");
  CacheConfig config = prefix_config(Format::Q4, 16);
  if (tiers) with_tiers(config, dir.path, 512u << 10);
  KVCache cache(config);
  std::mt19937 rng(tiers ? 11 : 7);
  const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint32_t>(n)); };
  // Three documents many requests start from, then a private tail.
  const std::vector<std::vector<TokenId>> documents = {prompt(160, 100), prompt(96, 2000), prompt(240, 30000)};
  struct Live {
    SeqId seq;
    std::vector<TokenId> tokens;
  };
  std::vector<Live> live;
  TokenId fresh = 1 << 20;
  std::size_t shared_tokens = 0;
  for (int op = 0; op < kOps; ++op) {
    const int kind = live.empty() ? 0 : pick(10);
    if (kind <= 2 && live.size() < 12) {  // a request: a document's prefix, then its own tokens
      const auto& doc = documents[static_cast<std::size_t>(pick(3))];
      std::vector<TokenId> tokens(doc.begin(), doc.begin() + 1 + pick(static_cast<int>(doc.size())));
      for (int i = pick(40); i > 0; --i) tokens.push_back(fresh++);
      const SeqId seq = cache.create_sequence();
      const PrefixPlan plan = cache.lookup_prefix(tokens);
      REQUIRE(plan.tokens() <= static_cast<int>(tokens.size()));
      cache.share_prefix(seq, plan);
      shared_tokens += static_cast<std::size_t>(plan.tokens());
      append(cache, seq, tokens, plan.tokens(), static_cast<int>(tokens.size()) - plan.tokens());
      if (pick(2) == 0) cache.cache_prefix(seq, tokens);
      live.push_back({seq, std::move(tokens)});
    } else if (kind == 3 && live.size() < 12) {
      const Live& parent = live[static_cast<std::size_t>(pick(static_cast<int>(live.size())))];
      live.push_back({cache.fork(parent.seq), parent.tokens});
    } else if (kind == 4) {
      Live& l = live[static_cast<std::size_t>(pick(static_cast<int>(live.size())))];
      const int length = pick(static_cast<int>(l.tokens.size()) + 1);
      cache.truncate(l.seq, length);
      l.tokens.resize(static_cast<std::size_t>(length));
    } else if (kind <= 6) {  // decode steps
      Live& l = live[static_cast<std::size_t>(pick(static_cast<int>(live.size())))];
      const int steps = 1 + pick(20);
      const int first = static_cast<int>(l.tokens.size());
      if (first + steps > 1000) continue;
      for (int i = 0; i < steps; ++i) l.tokens.push_back(fresh++);
      for (int i = 0; i < steps; ++i) append(cache, l.seq, l.tokens, first + i, 1);
    } else if (kind <= 8) {
      const auto at = static_cast<std::size_t>(pick(static_cast<int>(live.size())));
      cache.release(live[at].seq);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(at));
    } else {
      cache.evict_prefixes(static_cast<std::size_t>(pick(4)));
    }
    // What every sequence holds, and what the cache names, is in the pool.
    const CacheStats stats = cache.stats();
    const PrefixStats prefix = cache.prefix_stats();
    for (const Live& l : live) {
      for (int layer = 0; layer < kLayers; ++layer) REQUIRE(cache.length(l.seq, layer) == static_cast<int>(l.tokens.size()));
    }
    REQUIRE(stats.sealed_pages >= prefix.entries * kLayers * kKvHeads);
    if (tiers) REQUIRE(stats.memory.l1_used_bytes <= config.memory.l1_bytes);
  }
  CHECK(shared_tokens > 0);
  if (tiers) CHECK(cache.stats().memory.swap_out_bytes > 0);
  // A last request over a cached document attends as a fresh prefill of the same tokens.
  const SeqId check = cache.create_sequence();
  const PrefixPlan plan = cache.lookup_prefix(documents[2]);
  cache.share_prefix(check, plan);
  append(cache, check, documents[2], plan.tokens(), static_cast<int>(documents[2].size()) - plan.tokens());
  CacheConfig plain = prefix_config(Format::Q4, 16);
  plain.prefix_cache = false;
  KVCache alone(plain);
  const SeqId fresh_seq = alone.create_sequence();
  append(alone, fresh_seq, documents[2], 0, static_cast<int>(documents[2].size()));
  CHECK(bit_identical(attend_all(cache, check), attend_all(alone, fresh_seq)));
  cache.release(check);
  // Every sequence ends and the cache lets go: nothing is left in any tier.
  for (const Live& l : live) cache.release(l.seq);
  cache.evict_prefixes(1u << 30);
  const CacheStats end = cache.stats();
  CHECK(end.sealed_pages == 0);
  CHECK(end.residual_pages == 0);
  CHECK(end.memory.l1_used_bytes == 0);
  CHECK(cache.prefix_stats().entries == 0);
  CHECK(cache.prefix_stats().cached_bytes == 0);
}

TEST_CASE("a byte cap on the prefix cache drops the least recently used prefixes' last pages", "[prefix][kv_cache]") {
  CacheConfig config = prefix_config(Format::Q8, 0);
  KVCache probe(config);
  const auto first = prompt(128, 1), second = prompt(128, 5000);
  const SeqId p = probe.create_sequence();
  append(probe, p, first, 0, 128);
  probe.cache_prefix(p, first);
  const std::size_t entry = probe.prefix_stats().cached_bytes / 8;  // 8 whole pages
  REQUIRE(entry > 0);
  config.prefix_cache_bytes = 12 * entry;  // room for 12 of the two prompts' 16 positions
  KVCache cache(config);
  const SeqId a = cache.create_sequence();
  append(cache, a, first, 0, 128);
  CHECK(cache.cache_prefix(a, first) == 8);
  const SeqId b = cache.create_sequence();
  append(cache, b, second, 0, 128);
  CHECK(cache.cache_prefix(b, second) == 8);
  const PrefixStats stats = cache.prefix_stats();
  CHECK(stats.entries == 12);
  CHECK(stats.evictions == 4);
  CHECK(stats.cached_bytes <= config.prefix_cache_bytes);
  // The first prompt, least recently used, lost its last four pages; the second is whole.
  CHECK(cache.lookup_prefix(first).pages() == 4);
  CHECK(cache.lookup_prefix(second).pages() == 8);
}
