#include <catch2/catch.hpp>

#include <numeric>
#include <random>
#include <vector>

#include "prefix/prefix_index.h"

using namespace kv;

namespace {

constexpr int kIndexPageTokens = 4;
constexpr std::uint64_t kScope = 77;

std::vector<TokenId> tokens(int count, TokenId first = 100) {
  std::vector<TokenId> out(static_cast<std::size_t>(count));
  std::iota(out.begin(), out.end(), first);
  return out;
}

// Pages of position `index` for 2 layers x 2 kv heads, numbered so that a wrong share shows.
std::vector<PageId> pages_of(int index, PageId base = 0) {
  const auto p = base + static_cast<PageId>(index) * 10;
  return {p, p + 1, p + 2, p + 3};
}

void cache_all(PrefixIndex& index, const std::vector<TokenId>& t, PageId base = 0) {
  for (int page = 0; page < static_cast<int>(t.size()) / kIndexPageTokens; ++page) REQUIRE(index.insert(t, page, pages_of(page, base), 1));
}

// Every key collides unless the parents differ: different tokens meet at the same key.
std::uint64_t weak_hash(std::uint64_t parent, std::uint64_t, std::span<const TokenId>) { return parent * 31 + 1; }

}  // namespace

TEST_CASE("a lookup finds the longest cached prefix in whole pages, never the partial page", "[prefix]") {
  PrefixIndex index(kIndexPageTokens, kScope);
  const auto document = tokens(14);  // 3 whole pages and 2 tokens
  CHECK(index.lookup(document).pages() == 0);
  cache_all(index, document);
  CHECK(index.size() == 3);
  const PrefixPlan all = index.lookup(document);
  CHECK(all.pages() == 3);
  CHECK(all.tokens() == 12);
  for (int page = 0; page < 3; ++page) CHECK(index.pages(all.keys[static_cast<std::size_t>(page)]) == pages_of(page));
  // Another request over the same first 9 tokens, then its own: two whole pages shared.
  auto other = tokens(9);
  for (TokenId t : {7, 8, 9, 10, 11}) other.push_back(t);
  CHECK(index.lookup(other).pages() == 2);
  // A shorter prompt shares only its whole pages; one that differs in its first token, nothing.
  CHECK(index.lookup(tokens(7)).pages() == 1);
  CHECK(index.lookup(tokens(14, 101)).pages() == 0);
  CHECK(index.collisions() == 0);
}

TEST_CASE("the same tokens after a different prefix are another page", "[prefix]") {
  PrefixIndex index(kIndexPageTokens, kScope);
  auto a = tokens(8, 0), b = tokens(8, 0);
  b[0] = 999;  // page 1 holds the same ids in both, after different first pages
  cache_all(index, a);
  CHECK(index.lookup(b).pages() == 0);
  REQUIRE(index.insert(b, 0, pages_of(0, 500), 2));
  REQUIRE(index.insert(b, 1, pages_of(1, 500), 2));
  const PrefixPlan plan = index.lookup(b);
  REQUIRE(plan.pages() == 2);
  CHECK(index.pages(plan.keys[1]) == pages_of(1, 500));
  CHECK(index.pages(index.lookup(a).keys[1]) == pages_of(1));
}

TEST_CASE("a hash collision never shares a page: the stored token ids decide", "[prefix]") {
  PrefixIndex index(kIndexPageTokens, kScope, weak_hash);
  const auto a = tokens(8, 0), b = tokens(8, 50);
  cache_all(index, a);
  // b's first page has a's key; its tokens differ.
  CHECK(index.lookup(b).pages() == 0);
  CHECK(index.collisions() == 1);
  CHECK_FALSE(index.insert(b, 0, pages_of(0, 500), 2));  // the key is taken: b keeps its pages private
  CHECK(index.collisions() == 2);
  CHECK(index.lookup(a).pages() == 2);
}

TEST_CASE("an insert needs its prefix cached and a free position", "[prefix]") {
  PrefixIndex index(kIndexPageTokens, kScope);
  const auto t = tokens(12);
  CHECK_FALSE(index.insert(t, 1, pages_of(1), 1));  // page 0 is not cached
  REQUIRE(index.insert(t, 0, pages_of(0), 1));
  CHECK_FALSE(index.insert(t, 0, pages_of(0, 700), 1));  // cached already: the first pages stay
  CHECK(index.pages(index.lookup(t).keys[0]) == pages_of(0));
  CHECK(index.collisions() == 0);
}

TEST_CASE("eviction drops leaves, least recently used first, and a parent becomes a leaf", "[prefix]") {
  PrefixIndex index(kIndexPageTokens, kScope);
  const auto a = tokens(12, 0);
  auto b = tokens(12, 0);
  b[9] = 999;  // shares pages 0 and 1 with a, then branches
  cache_all(index, a);
  REQUIRE(index.insert(b, 2, pages_of(2, 500), 5));
  const PrefixPlan a_plan = index.lookup(a), b_plan = index.lookup(b);
  REQUIRE(a_plan.pages() == 3);
  REQUIRE(b_plan.pages() == 3);
  index.touch(a_plan, 9);  // a used last
  const auto order = index.eviction_order();
  REQUIRE(order == std::vector<std::uint64_t>{b_plan.keys[2], a_plan.keys[2]});
  CHECK(index.erase(order[0]) == pages_of(2, 500));
  CHECK(index.eviction_order() == std::vector<std::uint64_t>{a_plan.keys[2]});
  CHECK(index.erase(a_plan.keys[2]) == pages_of(2));
  CHECK(index.eviction_order() == std::vector<std::uint64_t>{a_plan.keys[1]});
  CHECK(index.lookup(a).pages() == 2);
}

TEST_CASE("random prompts: every lookup agrees with a plain longest-common-prefix count", "[prefix]") {
  std::mt19937 rng(11);
  PrefixIndex index(kIndexPageTokens, kScope);
  std::vector<std::vector<TokenId>> cached;
  for (int round = 0; round < 200; ++round) {
    // A prompt that continues a cached one for a while, over a vocabulary of 3 ids.
    std::vector<TokenId> prompt;
    if (!cached.empty() && rng() % 2 == 0) {
      const auto& base = cached[rng() % cached.size()];
      prompt.assign(base.begin(), base.begin() + static_cast<std::ptrdiff_t>(rng() % (base.size() + 1)));
    }
    const std::size_t length = prompt.size() + rng() % 20;
    while (prompt.size() < length) prompt.push_back(static_cast<TokenId>(rng() % 3));
    std::size_t expected = 0;  // whole pages shared with the best cached prompt
    for (const auto& c : cached) {
      std::size_t same = 0;
      while (same < c.size() && same < prompt.size() && c[same] == prompt[same]) ++same;
      expected = std::max(expected, same / kIndexPageTokens);
    }
    REQUIRE(static_cast<std::size_t>(index.lookup(prompt).pages()) == expected);
    for (int page = static_cast<int>(expected); page < static_cast<int>(prompt.size()) / kIndexPageTokens; ++page) {
      REQUIRE(index.insert(prompt, page, pages_of(page), static_cast<std::uint64_t>(round)));
    }
    cached.push_back(prompt);
  }
  CHECK(index.collisions() == 0);
}
