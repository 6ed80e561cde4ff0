// The prefix cache: whole sealed pages of earlier prompts, found by their token ids
// (prefix/prefix_index.h), shared by a later sequence that starts with the same tokens so that
// its prefill computes only the rest.
//
// The cache holds a reference to every page it names, and a copy of each page's summary (its key
// bounds and the means it was sealed with: the means cannot be recomputed from the stored page).
// Its pages are ordinary pool pages: unreferenced by any sequence they are cold pages like any
// other, demoted to L2 by the same retention order, and they count against the tiers' budgets.
// Sharing is a plan first: lookup() names what would be shared, share() applies it to an empty
// sequence. A sequence never writes a shared page (sealed pages are immutable); a truncate into
// one returns its kept tokens to the sequence's own residual.
//
// A page requantized to the long tail (danger) is not cached: it no longer equals the page its
// tokens would seal to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "cache_config.h"
#include "memory/tiered_pool.h"
#include "page_table.h"
#include "prefix/prefix_index.h"

namespace kv {

struct PrefixStats {
  std::uint64_t lookups = 0;
  std::uint64_t looked_up_tokens = 0;  // prompt tokens of the lookups
  std::uint64_t hit_tokens = 0;        // of them, tokens in shared pages
  std::uint64_t inserted_pages = 0;    // page positions cached (each all layers' and heads' pages)
  std::uint64_t evictions = 0;         // page positions dropped
  std::uint64_t collisions = 0;        // hash matches whose tokens differed
  std::size_t entries = 0;             // page positions cached now
  std::size_t cached_bytes = 0;        // their pages (at their full size) and summaries
};

// The scope of a cache's pages: everything besides the tokens that must match for a page to be
// shared (the model, the geometry, the K/V formats and V group, page_tokens, the residual rule,
// the quantizer's outlier rule).
std::uint64_t prefix_scope(const CacheConfig& config);

class PrefixCache {
 public:
  // page_bytes: a sealed page's size (for cached_bytes).
  PrefixCache(const CacheConfig& config, PageTable& table, TieredPool& sealed, std::size_t page_bytes);
  ~PrefixCache();  // the cache's references go back to the pool
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // The longest cached whole-page prefix of `tokens` among the pages `tokens` would seal on its
  // own (the last residual_tokens stay in the residual); counted in the stats as a lookup.
  PrefixPlan lookup(std::span<const TokenId> tokens);
  // An empty sequence (no layer holds a token) takes the plan's pages and summaries; its length
  // becomes plan.tokens(). Throws InputError(api, "seq", ...) for a sequence that is not empty.
  void share(SeqId seq, const PrefixPlan& plan, const char* api);
  // The sequence's whole sealed pages that hold `tokens` from position 0 and are not cached yet
  // join the cache (a reference each); past CacheConfig::prefix_cache_bytes the least recently
  // used leaves go. Returns the page positions added.
  std::size_t insert(SeqId seq, std::span<const TokenId> tokens);
  // Drops up to `positions` page positions, least recently used leaves first; returns how many.
  std::size_t evict(std::size_t positions);

  PrefixStats stats() const;
  // Lookups, hits, inserts, evictions and collisions from zero; the cached pages stay.
  void reset_counters() { stats_ = PrefixStats{}; }

 private:
  std::size_t entry_summary_values() const;  // u16 values of one position's summaries
  std::size_t entry_bytes() const;           // one position's pages (full size) and summaries

  const CacheConfig& config_;
  PageTable& table_;
  TieredPool& sealed_;
  std::size_t page_bytes_;
  PrefixIndex index_;
  std::uint64_t clock_ = 0;  // lookups and inserts so far: the retention order
  // Per cached position: [layer][kv head] bounds [2][head_dim] then means [2][head_dim].
  std::unordered_map<std::uint64_t, std::vector<std::uint16_t>> summaries_;
  PrefixStats stats_;
};

}  // namespace kv
