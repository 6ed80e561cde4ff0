// Tentative tokens on the KV cache (speculative decoding's verify step): after any sequence of
// accepts and rejects the sequence is page for page what appending the kept tokens one decode
// step at a time gives, and no page leaks.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kv_cache.h"
#include "runtime/error.h"
#include "test_support.h"

using namespace kv;

using kvtest::bit_identical;

namespace {

constexpr int kSpecLayers = 2, kSpecQHeads = 4, kSpecKvHeads = 2, kSpecDim = 32, kSpecPageTokens = 16;

CacheConfig spec_config(Format format, int residual_tokens) {
  CacheConfig c;
  c.geometry = {kSpecLayers, kSpecQHeads, kSpecKvHeads, kSpecDim, 4096};
  c.k_format = format;
  c.v_format = format;
  c.page_tokens = kSpecPageTokens;
  c.residual_tokens = residual_tokens;
  c.threads = 2;
  return c;
}

// K or V rows of one token: a function of its id, its position and the layer.
std::vector<float> row(std::uint32_t token, int position, int layer, bool keys) {
  std::mt19937 rng(token * 7919u + static_cast<std::uint32_t>(position) * 31u + static_cast<std::uint32_t>(layer) * 3u + (keys ? 1u : 0u));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> out(static_cast<std::size_t>(kSpecKvHeads) * kSpecDim);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = normal(rng) + (keys && i % kSpecDim == 5 ? 3.0f : 0.0f);
  return out;
}

// Appends tokens [from, from + n) of `tokens` to every layer in one call per layer (a prompt or a
// verify step's tokens).
void append(KVCache& cache, SeqId seq, const std::vector<std::uint32_t>& tokens, int from, int n) {
  for (int l = 0; l < kSpecLayers; ++l) {
    std::vector<float> k, v;
    for (int p = from; p < from + n; ++p) {
      const auto kr = row(tokens[static_cast<std::size_t>(p)], p, l, true), vr = row(tokens[static_cast<std::size_t>(p)], p, l, false);
      k.insert(k.end(), kr.begin(), kr.end());
      v.insert(v.end(), vr.begin(), vr.end());
    }
    cache.append(seq, l, k.data(), v.data(), n);
  }
}

// Every layer's output for the last n positions' queries (a verify step attends k + 1 queries).
std::vector<float> attend(KVCache& cache, SeqId seq, int n, unsigned seed) {
  const auto q = kvtest::random_values(static_cast<std::size_t>(n) * kSpecQHeads * kSpecDim, seed);
  std::vector<float> out(q.size()), all;
  for (int l = 0; l < kSpecLayers; ++l) {
    cache.attend(seq, l, q.data(), n, out.data());
    all.insert(all.end(), out.begin(), out.end());
  }
  return all;
}

// A sequence's pages as bytes: every sealed page (header fields but the pool's version, data,
// key bounds, means) and every residual token's rows and the residual pages' bounds.
std::string page_bytes(const KVCache& cache, SeqId seq) {
  std::string out;
  const auto add = [&](const void* p, std::size_t n) { out.append(static_cast<const char*>(p), n); };
  for (int l = 0; l < kSpecLayers; ++l) {
    out += 'L';
    out += std::to_string(cache.length(seq, l));
    for (const std::vector<PageView>& head : cache.page_views(seq, l)) {
      for (const PageView& page : head) {
        const PageLayout& layout = *page.layout;
        const PageHeader* header = PageLayout::header(page.data);
        add(&header->tokens, sizeof header->tokens);
        add(&header->k_format, 2);
        add(page.key_min(), kSpecDim * 2);
        add(page.key_max(), kSpecDim * 2);
        if (page.means != nullptr) add(page.means, 2 * kSpecDim * 2);
        if (&layout == &cache.layout()) {
          add(&header->checksum, sizeof header->checksum);
          add(page.data + sizeof(PageHeader), layout.bytes - sizeof(PageHeader));
        } else {  // the residual: its valid tokens' rows
          add(layout.at<float>(page.data, layout.k_data), static_cast<std::size_t>(page.tokens) * kSpecDim * sizeof(float));
          add(layout.at<float>(page.data, layout.v_data), static_cast<std::size_t>(page.tokens) * kSpecDim * sizeof(float));
        }
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("accepted, rejected and partly accepted verify steps leave the cache as plain decoding would", "[speculative][kv_cache]") {
  const Format format = GENERATE(Format::F16, Format::Q8, Format::Q4);
  const int residual = GENERATE(0, 24);
  const int mode = GENERATE(0, 1, 2);  // accept all, reject all, random
  CAPTURE(format_name(format), residual, mode);
  std::mt19937 rng(static_cast<unsigned>(residual * 7 + mode));
  std::vector<std::uint32_t> committed;  // the tokens both sequences hold
  for (int i = 0; i < 37; ++i) committed.push_back(static_cast<std::uint32_t>(rng() % 32000));

  KVCache speculative(spec_config(format, residual)), plain(spec_config(format, residual));
  const SeqId s = speculative.create_sequence(), p = plain.create_sequence();
  append(speculative, s, committed, 0, 37);
  append(plain, p, committed, 0, 37);
  for (int round = 0; round < 24; ++round) {
    const int k = 1 + static_cast<int>(rng() % 8);
    // The verify step: k proposed tokens and the target's own next one, tentatively.
    std::vector<std::uint32_t> proposal = committed;
    for (int i = 0; i <= k; ++i) proposal.push_back(static_cast<std::uint32_t>(rng() % 32000));
    const int base = static_cast<int>(committed.size());
    speculative.begin_tentative(s);
    append(speculative, s, proposal, base, k + 1);
    CHECK(speculative.stats().sealed_pages == plain.stats().sealed_pages);  // tentative tokens seal nothing
    attend(speculative, s, k + 1, static_cast<unsigned>(round));
    const int keep = mode == 0 ? k + 1 : mode == 1 ? 0 : static_cast<int>(rng() % static_cast<unsigned>(k + 2));
    const CommitPlan plan = speculative.plan_commit(s, keep);
    REQUIRE(plan.tentative == k + 1);
    speculative.apply_commit(plan);
    CHECK_FALSE(speculative.tentative(s));
    // Plain decoding of the same kept tokens, one step each; after a full rejection the target's
    // own token is committed by the next round's verify, so here nothing.
    for (int i = 0; i < keep; ++i) {
      committed.push_back(proposal[static_cast<std::size_t>(base + i)]);
      append(plain, p, committed, base + i, 1);
    }
    REQUIRE(speculative.length(s, 0) == plain.length(p, 0));
    REQUIRE(page_bytes(speculative, s) == page_bytes(plain, p));
  }
  CHECK(speculative.stats().sealed_pages == plain.stats().sealed_pages);
  CHECK(speculative.stats().residual_pages == plain.stats().residual_pages);
  CHECK(bit_identical(attend(speculative, s, 1, 99), attend(plain, p, 1, 99)));
}

TEST_CASE("a rollback across a page boundary seals nothing, and a commit across it seals the page plain decoding seals",
          "[speculative][kv_cache]") {
  KVCache cache(spec_config(Format::Q4, 0)), plain(spec_config(Format::Q4, 0));
  std::vector<std::uint32_t> tokens(40);
  for (std::size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<std::uint32_t>(1000 + i);
  const SeqId s = cache.create_sequence(), p = plain.create_sequence();
  append(cache, s, tokens, 0, 14);
  append(plain, p, tokens, 0, 14);
  const std::size_t sealed = cache.stats().sealed_pages;
  cache.begin_tentative(s);
  append(cache, s, tokens, 14, 5);  // crosses the page boundary at 16
  CHECK(cache.stats().sealed_pages == sealed);
  cache.apply_commit(cache.plan_commit(s, 0));
  CHECK(cache.length(s, 1) == 14);
  CHECK(cache.stats().sealed_pages == sealed);
  CHECK(page_bytes(cache, s) == page_bytes(plain, p));
  // Now keep three of five: the page fills and seals, as one token at a time would seal it.
  cache.begin_tentative(s);
  append(cache, s, tokens, 14, 5);
  cache.apply_commit(cache.plan_commit(s, 3));
  for (int i = 14; i < 17; ++i) append(plain, p, tokens, i, 1);
  CHECK(cache.stats().sealed_pages == sealed + kSpecLayers * kSpecKvHeads);
  CHECK(page_bytes(cache, s) == page_bytes(plain, p));
}

TEST_CASE("tentative tokens refuse what would break them: a second begin, a truncate, a stale or unfinished commit",
          "[speculative][kv_cache]") {
  KVCache cache(spec_config(Format::Q8, 16));
  std::vector<std::uint32_t> tokens(64, 7);
  const SeqId s = cache.create_sequence();
  append(cache, s, tokens, 0, 20);
  const auto field_of = [](auto&& call) {
    try {
      call();
    } catch (const InputError& e) {
      return e.field();
    }
    return std::string("accepted");
  };
  CHECK(field_of([&] { cache.plan_commit(s, 0); }) == "seq");  // nothing tentative
  cache.begin_tentative(s);
  CHECK(field_of([&] { cache.begin_tentative(s); }) == "seq");
  CHECK(field_of([&] { cache.truncate(s, 10); }) == "seq");
  append(cache, s, tokens, 20, 3);
  const CommitPlan plan = cache.plan_commit(s, 2);
  CHECK(field_of([&] { cache.plan_commit(s, 4); }) == "keep");
  // Layer 0 of the next token only: a forward pass in the middle.
  const auto k = row(7, 23, 0, true), v = row(7, 23, 0, false);
  cache.append(s, 0, k.data(), v.data(), 1);
  CHECK(field_of([&] { cache.plan_commit(s, 1); }) == "seq");
  CHECK(field_of([&] { cache.apply_commit(plan); }) == "plan");
  const auto k1 = row(7, 23, 1, true), v1 = row(7, 23, 1, false);
  cache.append(s, 1, k1.data(), v1.data(), 1);
  cache.apply_commit(cache.plan_commit(s, 2));
  CHECK(cache.length(s, 0) == 22);
  CHECK(field_of([&] { cache.apply_commit(plan); }) == "plan");  // spent
}

TEST_CASE("random verify steps, commits, forks and ends keep every page accounted for", "[speculative][kv_cache]") {
#if defined(__SANITIZE_ADDRESS__)
  constexpr int kOps = 1000;  // the sanitizer build runs the same sequence, shorter
#else
  constexpr int kOps = 10000;
#endif
  KVCache cache(spec_config(Format::Q4, 16));
  std::mt19937 rng(2026);
  struct Live {
    SeqId seq;
    std::vector<std::uint32_t> tokens;
  };
  std::vector<Live> live;
  for (int op = 0; op < kOps; ++op) {
    const unsigned what = rng() % 10;
    if (live.empty() || what == 0) {
      Live l{cache.create_sequence(), {}};
      for (int i = 0, n = 1 + static_cast<int>(rng() % 40); i < n; ++i) l.tokens.push_back(rng() % 500);
      append(cache, l.seq, l.tokens, 0, static_cast<int>(l.tokens.size()));
      live.push_back(std::move(l));
      continue;
    }
    Live& l = live[rng() % live.size()];
    if (what == 1 && live.size() > 1) {
      cache.release(l.seq);
      l = std::move(live.back());
      live.pop_back();
    } else if (what == 2) {
      Live child{cache.fork(l.seq), l.tokens};
      live.push_back(std::move(child));
    } else if (static_cast<int>(l.tokens.size()) + 9 < 4096) {
      const int k = 1 + static_cast<int>(rng() % 8);
      auto proposal = l.tokens;
      for (int i = 0; i <= k; ++i) proposal.push_back(rng() % 500);
      cache.begin_tentative(l.seq);
      append(cache, l.seq, proposal, static_cast<int>(l.tokens.size()), k + 1);
      const int keep = static_cast<int>(rng() % static_cast<unsigned>(k + 2));
      cache.apply_commit(cache.plan_commit(l.seq, keep));
      l.tokens.assign(proposal.begin(), proposal.begin() + static_cast<std::ptrdiff_t>(l.tokens.size()) + keep);
      REQUIRE(cache.length(l.seq, kSpecLayers - 1) == static_cast<int>(l.tokens.size()));
    }
  }
  // Each sequence's pages: sealed ones shared by forks count once, so end them all and expect none.
  for (const Live& l : live) cache.release(l.seq);
  CHECK(cache.stats().sealed_pages == 0);
  CHECK(cache.stats().residual_pages == 0);
}

TEST_CASE("verify steps under a tight L1 with an L2 tier: pages move, nothing fails, the target attends as plain decoding does",
          "[speculative][kv_cache][memory]") {
  kvtest::TempDir dir_a("spec-tiers-a"), dir_b("spec-tiers-b");
  const auto tiered = [](const std::string& dir) {
    CacheConfig c = spec_config(Format::Q4, 16);
    c.memory.l1_bytes = 64u << 10;  // a few dozen q4 pages: most of the context lives in L2
    c.memory.l0_bytes = 16u << 10;
    c.memory.l2.dir = dir;
    c.memory.l2.segment_bytes = 4u << 20;
    c.memory.l2.batch_bytes = 32u << 10;
    c.memory.pin_sink_tokens = 0;
    c.memory.pin_window_tokens = 16;
    return c;
  };
  KVCache speculative(tiered(dir_a.path)), plain(tiered(dir_b.path));
  std::mt19937 rng(11);
  std::vector<std::uint32_t> committed;
  for (int i = 0; i < 600; ++i) committed.push_back(rng() % 32000);
  const SeqId s = speculative.create_sequence(), p = plain.create_sequence();
  append(speculative, s, committed, 0, 600);
  append(plain, p, committed, 0, 600);
  for (int round = 0; round < 30; ++round) {
    const int k = 1 + static_cast<int>(rng() % 6);
    auto proposal = committed;
    for (int i = 0; i <= k; ++i) proposal.push_back(rng() % 32000);
    const int base = static_cast<int>(committed.size());
    speculative.begin_tentative(s);
    append(speculative, s, proposal, base, k + 1);
    attend(speculative, s, k + 1, static_cast<unsigned>(round));
    const int keep = static_cast<int>(rng() % static_cast<unsigned>(k + 2));
    speculative.apply_commit(speculative.plan_commit(s, keep));
    for (int i = 0; i < keep; ++i) {
      committed.push_back(proposal[static_cast<std::size_t>(base + i)]);
      append(plain, p, committed, base + i, 1);
      attend(plain, p, 1, 1000u + static_cast<unsigned>(i));
    }
  }
  CHECK(speculative.stats().memory.swap_out_bytes > 0);
  CHECK(speculative.stats().memory.swap_in_bytes > 0);
  CHECK_FALSE(speculative.stats().memory.l2_failed);
  REQUIRE(speculative.length(s, 0) == plain.length(p, 0));
  CHECK(bit_identical(attend(speculative, s, 1, 7), attend(plain, p, 1, 7)));
}
