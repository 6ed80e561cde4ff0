#include "prefix/prefix_index.h"

#include <algorithm>
#include <array>
#include <utility>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "runtime/error.h"

namespace kv {

std::uint64_t prefix_chain_hash(std::uint64_t parent, std::uint64_t scope, std::span<const TokenId> tokens) {
  const std::array<std::uint64_t, 2> seed_words{parent, scope};
  const XXH64_hash_t seed = XXH3_64bits(seed_words.data(), sizeof seed_words);
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), seed);
}

PrefixIndex::PrefixIndex(int page_tokens, std::uint64_t scope, Hasher hasher)
    : page_tokens_(page_tokens), scope_(scope), hasher_(hasher) {
  KV_ASSERT(page_tokens > 0, "a prefix index needs a positive page size");
}

const PrefixIndex::Entry* PrefixIndex::match(std::uint64_t key, std::uint64_t parent, std::span<const TokenId> tokens) const {
  const auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  const Entry& entry = it->second;
  if (entry.parent != parent || !std::equal(tokens.begin(), tokens.end(), entry.tokens.begin(), entry.tokens.end())) {
    ++collisions_;
    return nullptr;
  }
  return &entry;
}

PrefixPlan PrefixIndex::lookup(std::span<const TokenId> tokens) const {
  PrefixPlan plan;
  plan.page_tokens = page_tokens_;
  std::uint64_t parent = kPrefixRoot;
  const std::size_t whole = tokens.size() / static_cast<std::size_t>(page_tokens_);
  for (std::size_t page = 0; page < whole; ++page) {
    const auto slice = tokens.subspan(page * static_cast<std::size_t>(page_tokens_), static_cast<std::size_t>(page_tokens_));
    const std::uint64_t key = hasher_(parent, scope_, slice);
    if (match(key, parent, slice) == nullptr) break;
    plan.keys.push_back(key);
    parent = key;
  }
  return plan;
}

const std::vector<PageId>& PrefixIndex::pages(std::uint64_t key) const {
  const auto it = entries_.find(key);
  KV_ASSERT(it != entries_.end(), "pages of a prefix key the index does not hold");
  return it->second.pages;
}

void PrefixIndex::touch(const PrefixPlan& plan, std::uint64_t now) {
  for (std::uint64_t key : plan.keys) {
    const auto it = entries_.find(key);
    KV_ASSERT(it != entries_.end(), "a prefix plan outlived its entries");
    it->second.last_used = now;
  }
}

std::optional<std::uint64_t> PrefixIndex::insert(std::span<const TokenId> tokens, int index, std::vector<PageId> pages, std::uint64_t now) {
  const auto page = static_cast<std::size_t>(page_tokens_);
  KV_ASSERT(index >= 0 && (static_cast<std::size_t>(index) + 1) * page <= tokens.size(), "a prefix insert past the whole pages of its tokens");
  const PrefixPlan prefix = lookup(tokens.first(static_cast<std::size_t>(index) * page));
  if (prefix.pages() != index) return std::nullopt;  // its prefix is not (or no longer) cached
  return insert_after(index == 0 ? kPrefixRoot : prefix.keys.back(), tokens.subspan(static_cast<std::size_t>(index) * page, page),
                      std::move(pages), now);
}

std::optional<std::uint64_t> PrefixIndex::insert_after(std::uint64_t parent, std::span<const TokenId> page, std::vector<PageId> pages,
                                                       std::uint64_t now) {
  KV_ASSERT(page.size() == static_cast<std::size_t>(page_tokens_), "a prefix page of the wrong size");
  const auto up = entries_.find(parent);
  if (parent != kPrefixRoot && up == entries_.end()) return std::nullopt;  // its prefix is not (or no longer) cached
  const std::uint64_t key = hasher_(parent, scope_, page);
  if (entries_.count(key) > 0) {
    match(key, parent, page);  // counts a collision when the key holds another page
    return std::nullopt;
  }
  Entry entry;
  entry.parent = parent;
  entry.tokens.assign(page.begin(), page.end());
  entry.pages = std::move(pages);
  entry.last_used = now;
  entries_.emplace(key, std::move(entry));
  if (parent != kPrefixRoot) ++entries_.at(parent).children;
  return key;
}

std::vector<std::uint64_t> PrefixIndex::eviction_order() const {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> leaves;  // (last used, key)
  for (const auto& [key, entry] : entries_) {
    if (entry.children == 0) leaves.emplace_back(entry.last_used, key);
  }
  std::sort(leaves.begin(), leaves.end());  // ties by key: the same order on every run
  std::vector<std::uint64_t> keys;
  keys.reserve(leaves.size());
  for (const auto& [used, key] : leaves) keys.push_back(key);
  return keys;
}

std::vector<PageId> PrefixIndex::erase(std::uint64_t key) {
  const auto it = entries_.find(key);
  KV_ASSERT(it != entries_.end(), "erase of a prefix key the index does not hold");
  KV_ASSERT(it->second.children == 0, "erase of a prefix entry another entry continues");
  std::vector<PageId> pages = std::move(it->second.pages);
  const std::uint64_t parent = it->second.parent;
  entries_.erase(it);
  if (const auto up = entries_.find(parent); up != entries_.end()) --up->second.children;
  return pages;
}

}  // namespace kv
