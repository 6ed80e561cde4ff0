#include "prefix_cache.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <string>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "runtime/error.h"

namespace kv {

std::uint64_t prefix_scope(const CacheConfig& config) {
  const ModelGeometry& g = config.geometry;
  float outlier = config.outlier_factor;
  std::uint32_t outlier_bits = 0;
  static_assert(sizeof outlier_bits == sizeof outlier);
  std::memcpy(&outlier_bits, &outlier, sizeof outlier);
  const std::array<std::uint64_t, 12> words{config.model_key,
                                           static_cast<std::uint64_t>(g.layers),
                                           static_cast<std::uint64_t>(g.q_heads),
                                           static_cast<std::uint64_t>(g.kv_heads),
                                           static_cast<std::uint64_t>(g.head_dim),
                                           static_cast<std::uint64_t>(config.k_format),
                                           static_cast<std::uint64_t>(config.v_format),
                                           static_cast<std::uint64_t>(config.v_group),
                                           static_cast<std::uint64_t>(config.page_tokens),
                                           static_cast<std::uint64_t>(config.residual_tokens),
                                           static_cast<std::uint64_t>(config.pad_pages_to_4k),
                                           outlier_bits};
  const std::uint64_t scope = XXH3_64bits(words.data(), sizeof words);
  if (!config.visual.own) return scope;
  // Image pages in formats of their own are other bytes for the same tokens.
  const std::array<std::uint64_t, 4> visual{scope, static_cast<std::uint64_t>(config.visual.k_format),
                                            static_cast<std::uint64_t>(config.visual.v_format),
                                            static_cast<std::uint64_t>(config.visual.v_group)};
  return XXH3_64bits(visual.data(), sizeof visual);
}

PrefixCache::PrefixCache(const CacheConfig& config, PageTable& table, TieredPool& sealed, std::size_t page_bytes)
    : config_(config), table_(table), sealed_(sealed), page_bytes_(page_bytes), index_(config.page_tokens, prefix_scope(config)) {}

PrefixCache::~PrefixCache() {
  while (evict(index_.size()) > 0) {
  }
}

std::size_t PrefixCache::entry_summary_values() const {
  const ModelGeometry& g = config_.geometry;
  return static_cast<std::size_t>(g.layers) * static_cast<std::size_t>(g.kv_heads) * 4 * static_cast<std::size_t>(g.head_dim);
}

PrefixPlan PrefixCache::lookup(std::span<const TokenId> tokens) {
  const std::size_t collisions = index_.collisions();
  PrefixPlan plan = index_.lookup(tokens);
  stats_.collisions += index_.collisions() - collisions;
  // Only pages the prompt would seal itself: past them its prefill keeps tokens in the residual,
  // and a shared page there would not be the state the prompt makes on its own.
  const int sealable = std::max(0, (static_cast<int>(tokens.size()) - config_.residual_tokens) / config_.page_tokens);
  if (plan.pages() > sealable) plan.keys.resize(static_cast<std::size_t>(sealable));
  ++stats_.lookups;
  stats_.looked_up_tokens += tokens.size();
  stats_.hit_tokens += static_cast<std::uint64_t>(plan.tokens());
  index_.touch(plan, ++clock_);
  return plan;
}

void PrefixCache::share(SeqId seq, const PrefixPlan& plan, const char* api) {
  std::vector<LayerPages>& layers = table_.layers(seq, api);
  for (const LayerPages& layer : layers) {
    if (layer.length > 0) throw InputError(api, "seq", "a shared prefix needs an empty sequence; this one holds " + std::to_string(layer.length) + " tokens");
  }
  const ModelGeometry& g = config_.geometry;
  const auto dim = static_cast<std::size_t>(g.head_dim);
  for (std::uint64_t key : plan.keys) {
    const std::vector<PageId>& pages = index_.pages(key);
    const std::vector<std::uint16_t>& summaries = summaries_.at(key);
    for (int l = 0; l < g.layers; ++l) {
      for (int h = 0; h < g.kv_heads; ++h) {
        const auto at = static_cast<std::size_t>(l) * static_cast<std::size_t>(g.kv_heads) + static_cast<std::size_t>(h);
        const std::uint16_t* entry = summaries.data() + at * 4 * dim;
        table_.share_sealed(seq, l, h, pages[at], entry, entry + 2 * dim);
      }
    }
  }
  for (LayerPages& layer : layers) layer.length = layer.sealed_tokens = plan.tokens();
}

std::size_t PrefixCache::insert(SeqId seq, std::span<const TokenId> tokens) {
  const std::vector<LayerPages>& layers = table_.layers(seq, "KVCache::cache_prefix");
  const ModelGeometry& g = config_.geometry;
  const auto dim = static_cast<std::size_t>(g.head_dim);
  // Whole pages every layer and head has sealed, within the tokens given.
  std::size_t whole = tokens.size() / static_cast<std::size_t>(config_.page_tokens);
  for (const LayerPages& layer : layers) {
    for (const HeadPages& head : layer.heads) whole = std::min(whole, head.sealed.size());
  }
  std::size_t added = 0;
  const PrefixPlan cached = index_.lookup(tokens);
  std::uint64_t parent = cached.pages() > 0 ? cached.keys.back() : kPrefixRoot;
  const auto page_tokens = static_cast<std::size_t>(config_.page_tokens);
  for (std::size_t page = static_cast<std::size_t>(cached.pages()); page < whole; ++page) {
    std::vector<PageId> pages;
    std::vector<std::uint16_t> summaries;
    pages.reserve(static_cast<std::size_t>(g.layers) * static_cast<std::size_t>(g.kv_heads));
    summaries.reserve(entry_summary_values());
    bool degraded = false;
    for (const LayerPages& layer : layers) {
      for (const HeadPages& head : layer.heads) {
        const PageId id = head.sealed[page];
        degraded = degraded || sealed_.long_tail(id);
        pages.push_back(id);
        const std::uint16_t* bounds = head.summaries.bounds(page, g.head_dim);
        const std::uint16_t* means = head.summaries.means(page, g.head_dim);
        summaries.insert(summaries.end(), bounds, bounds + 2 * dim);
        summaries.insert(summaries.end(), means, means + 2 * dim);
      }
    }
    if (degraded) break;  // no longer the page its tokens seal to; nor can a longer prefix be cached
    const std::size_t collisions = index_.collisions();
    const std::optional<std::uint64_t> key = index_.insert_after(parent, tokens.subspan(page * page_tokens, page_tokens), pages, ++clock_);
    stats_.collisions += index_.collisions() - collisions;
    if (!key) break;
    for (PageId id : pages) sealed_.retain(id);
    summaries_.emplace(*key, std::move(summaries));
    parent = *key;
    ++added;
  }
  stats_.inserted_pages += added;
  if (config_.prefix_cache_bytes > 0) {
    const std::size_t entry = entry_bytes();
    const std::size_t keep = config_.prefix_cache_bytes / entry;
    if (index_.size() > keep) evict(index_.size() - keep);
  }
  return added;
}

std::size_t PrefixCache::entry_bytes() const {
  const ModelGeometry& g = config_.geometry;
  return static_cast<std::size_t>(g.layers) * static_cast<std::size_t>(g.kv_heads) * page_bytes_ +
         entry_summary_values() * sizeof(std::uint16_t);
}

std::size_t PrefixCache::evict(std::size_t positions) {
  std::size_t evicted = 0;
  // One leaf at a time: the parent of an evicted leaf becomes a leaf, and may be older than
  // every other leaf.
  while (evicted < positions && index_.size() > 0) {
    const std::uint64_t key = index_.eviction_order().front();
    for (PageId id : index_.erase(key)) sealed_.release(id);
    summaries_.erase(key);
    ++evicted;
  }
  stats_.evictions += evicted;
  return evicted;
}

PrefixStats PrefixCache::stats() const {
  PrefixStats s = stats_;
  s.entries = index_.size();
  s.cached_bytes = index_.size() * entry_bytes();
  return s;
}

}  // namespace kv
