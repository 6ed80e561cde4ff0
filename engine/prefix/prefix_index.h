// The prefix cache's index: which sealed pages hold which whole pages of tokens, found by a
// hash chain over the token ids so that a request can share the longest prefix another request
// already prefilled.
//
// A page position is keyed by the chain hash of its tokens and the chain before it (the hash of
// page i-1's key, the index's scope and page i's token ids), so a key names the whole prefix up
// to and including that page. A hit compares the stored token ids and parent as well: a hash
// collision stops the match instead of sharing a wrong page. Only whole pages are cached; the
// partial last page of a prompt stays private to its sequence.
//
// The scope hashes everything that makes pages incompatible besides their tokens (model, K/V
// formats, page_tokens, v_group, the residual rule); layer and kv head are positions in an
// entry's pages. The index only names pages: who holds references to them, where they live and
// when an entry is dropped are its owner's (the cache's) decisions, taken from the plans below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "memory/page_pool.h"

namespace kv {

using TokenId = std::int32_t;

// Chain hash of one page: XXH3 over its token ids, seeded by the parent's hash and the scope.
std::uint64_t prefix_chain_hash(std::uint64_t parent, std::uint64_t scope, std::span<const TokenId> tokens);
// The parent hash of a prompt's first page.
inline constexpr std::uint64_t kPrefixRoot = 0x6b76626e63687372ull;

// What a lookup found: the longest cached prefix in whole pages, as the keys of its pages in
// order. A value: nothing is shared until the owner applies it.
struct PrefixPlan {
  std::vector<std::uint64_t> keys;
  int page_tokens = 0;
  int pages() const { return static_cast<int>(keys.size()); }
  int tokens() const { return pages() * page_tokens; }
};

class PrefixIndex {
 public:
  using Hasher = std::uint64_t (*)(std::uint64_t parent, std::uint64_t scope, std::span<const TokenId> tokens);

  // hasher: prefix_chain_hash, or a weaker one in tests that force collisions.
  PrefixIndex(int page_tokens, std::uint64_t scope, Hasher hasher = prefix_chain_hash);

  // The longest cached prefix of `tokens` in whole pages. Pure: no recency is updated.
  PrefixPlan lookup(std::span<const TokenId> tokens) const;
  // The pages (one per layer and kv head, as inserted) of a plan's key.
  const std::vector<PageId>& pages(std::uint64_t key) const;
  // Marks the plan's entries used at `now` (the owner's clock: retention order for eviction).
  void touch(const PrefixPlan& plan, std::uint64_t now);

  // Records `pages` as holding whole page `index` of `tokens` and returns its key. Its prefix
  // (pages 0..index-1) must be cached. Returns nothing, recording nothing, when the position is
  // cached already, its prefix is not, or its key collides with another page's (the caller
  // keeps its pages private).
  std::optional<std::uint64_t> insert(std::span<const TokenId> tokens, int index, std::vector<PageId> pages, std::uint64_t now);
  // The same for the page that follows the cached entry `parent` (kPrefixRoot: a first page),
  // `page` its page_tokens ids: a caller caching a prompt page by page chains the keys instead
  // of hashing its prefix again for every page.
  std::optional<std::uint64_t> insert_after(std::uint64_t parent, std::span<const TokenId> page, std::vector<PageId> pages,
                                            std::uint64_t now);

  // Entries no other entry continues (only those can go without orphaning a longer prefix),
  // least recently used first.
  std::vector<std::uint64_t> eviction_order() const;
  // Removes a leaf entry and returns its pages, for the owner to release.
  std::vector<PageId> erase(std::uint64_t key);

  std::size_t size() const { return entries_.size(); }
  std::size_t collisions() const { return collisions_; }  // lookups and inserts stopped by one
  int page_tokens() const { return page_tokens_; }

 private:
  struct Entry {
    std::uint64_t parent = kPrefixRoot;
    std::vector<TokenId> tokens;  // page_tokens of them, compared on every hit
    std::vector<PageId> pages;
    std::uint64_t last_used = 0;
    int children = 0;
  };
  // The entry holding `tokens` after `parent` under `key`, or nullptr (counting a collision
  // when the key holds another page).
  const Entry* match(std::uint64_t key, std::uint64_t parent, std::span<const TokenId> tokens) const;

  int page_tokens_;
  std::uint64_t scope_;
  Hasher hasher_;
  std::unordered_map<std::uint64_t, Entry> entries_;
  mutable std::size_t collisions_ = 0;
};

}  // namespace kv
