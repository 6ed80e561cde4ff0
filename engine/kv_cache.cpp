#include "kv_cache.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "quant/quantizer.h"
#include "runtime/error.h"

namespace kv {

namespace {

constexpr std::size_t kPagesPerSlab = 64;
constexpr int kAppendBlockPages = 16;  // tokens copied into the residual between sealing passes

}  // namespace

KVCache::KVCache(const CacheConfig& config, Telemetry* telemetry)
    : config_((validate_cache_config(config), config)),
      telemetry_(telemetry),
      layout_(cache_page_layout(config, config.k_format, config.v_format)),
      residual_layout_(cache_page_layout(config, Format::F32, Format::F32)),
      long_tail_layout_(cache_page_layout(config, Format::Q2, Format::Q2)),
      visual_layout_(visual_page_layout(config)),
      pool_(config.threads, config.serial ? ThreadPool::Background::Inline : ThreadPool::Background::Thread),
      kernels_(&page_kernels(resolve_isa(config.isa))),
      sealed_pool_(layout_.bytes, cache_page_alignment(config), config.memory),
      residual_pool_(residual_layout_.bytes, cache_page_alignment(config), kPagesPerSlab),
      table_(config.geometry, sealed_pool_, residual_pool_, residual_layout_.bytes),
      sealer_(config_, layouts(), table_, sealed_pool_, residual_pool_, pool_, telemetry),
      advisor_(sealed_pool_, config_.memory, config.page_tokens, config.geometry.layers),
      resident_(layouts(), config.page_tokens, config.geometry.head_dim, sealed_pool_,
                residual_pool_),
      call_(config.memory.l0_bytes) {
  if (config_.softmax_scale == 0.0f) config_.softmax_scale = 1.0f / std::sqrt(static_cast<float>(config.geometry.head_dim));
  if (config_.memory.l1_bytes > 0 && long_tail_layout_.bytes < layout_.bytes) {
    sealed_pool_.set_long_tail(long_tail_layout_.bytes);
  }
  if (config_.visual.own) sealed_pool_.set_visual_bytes(visual_layout_.bytes);
  if (config_.prefix_cache) prefix_ = std::make_unique<PrefixCache>(config_, table_, sealed_pool_, layout_.bytes);
}

KVCache::~KVCache() = default;

CacheLayouts KVCache::layouts() const {
  return {&layout_, &residual_layout_, &long_tail_layout_, config_.visual.own ? &visual_layout_ : nullptr};
}

SeqId KVCache::create_sequence() { return table_.create(); }

SeqId KVCache::fork(SeqId parent) {
  const SeqId child = table_.fork(parent, "KVCache::fork");
  for (LayerPages& layer : table_.layers(child, "KVCache::fork")) {
    for (HeadPages& head : layer.heads) advisor_.update_pins(layer.length, head.sealed, head.pins);
  }
  update_memory_pressure();
  return child;
}

void KVCache::release(SeqId seq) {
  table_.release(seq, "KVCache::release");
  tentative_.erase(seq);
  update_memory_pressure();
}

namespace {

std::vector<int> layer_lengths(const std::vector<LayerPages>& layers) {
  std::vector<int> lengths;
  lengths.reserve(layers.size());
  for (const LayerPages& layer : layers) lengths.push_back(layer.length);
  return lengths;
}

}  // namespace

void KVCache::begin_tentative(SeqId seq) {
  const std::vector<LayerPages>& layers = table_.layers(seq, "KVCache::begin_tentative");
  if (tentative(seq)) throw InputError("KVCache::begin_tentative", "seq", "the sequence's tentative tokens are not committed yet");
  const std::vector<int> lengths = layer_lengths(layers);
  // No tentative tokens yet: this checks that every layer holds the same tokens.
  const CommitPlan none = kv::plan_commit(seq, lengths.front(), lengths, 0, "KVCache::begin_tentative");
  tentative_.emplace(seq, none.committed);
}

CommitPlan KVCache::plan_commit(SeqId seq, int keep) const {
  const std::vector<LayerPages>& layers = table_.layers(seq, "KVCache::plan_commit");
  const auto it = tentative_.find(seq);
  if (it == tentative_.end()) throw InputError("KVCache::plan_commit", "seq", "the sequence has no tentative tokens (begin_tentative)");
  return kv::plan_commit(seq, it->second, layer_lengths(layers), keep, "KVCache::plan_commit");
}

void KVCache::apply_commit(const CommitPlan& plan) {
  std::vector<LayerPages>& layers = table_.layers(plan.seq, "KVCache::apply_commit");
  const auto it = tentative_.find(plan.seq);
  const std::vector<int> lengths = layer_lengths(layers);
  const bool current = it != tentative_.end() && it->second == plan.committed &&
                       std::all_of(lengths.begin(), lengths.end(), [&](int n) { return n == plan.committed + plan.tentative; });
  if (!current) throw InputError("KVCache::apply_commit", "plan", "the sequence moved on since the plan was made");
  tentative_.erase(it);
  // The rejected tokens sit in the residual only (nothing sealed since the tentative tokens
  // began), so the cut touches no sealed page; then sealing catches up on the kept ones.
  for (std::size_t l = 0; l < layers.size(); ++l) {
    if (plan.released() > 0) sealer_.truncate(plan.seq, static_cast<int>(l), plan.new_length());
    LayerPages& layer = layers[l];
    for (HeadPages& head : layer.heads) advisor_.update_pins(layer.length, head.sealed, head.pins);
    seal(plan.seq, static_cast<int>(l));
  }
  update_memory_pressure();
}

PrefixPlan KVCache::lookup_prefix(std::span<const TokenId> tokens) {
  if (!prefix_) return PrefixPlan{{}, config_.page_tokens};
  return prefix_->lookup(tokens);
}

void KVCache::share_prefix(SeqId seq, const PrefixPlan& plan) {
  if (plan.pages() == 0) return;
  KV_ASSERT(prefix_ != nullptr, "a prefix plan from a cache without a prefix cache");
  prefix_->share(seq, plan, "KVCache::share_prefix");
  for (LayerPages& layer : table_.layers(seq, "KVCache::share_prefix")) {
    for (HeadPages& head : layer.heads) advisor_.update_pins(layer.length, head.sealed, head.pins);
  }
  update_memory_pressure();
}

std::size_t KVCache::cache_prefix(SeqId seq, std::span<const TokenId> tokens) {
  return prefix_ ? prefix_->insert(seq, tokens) : 0;
}

std::size_t KVCache::evict_prefixes(std::size_t positions) {
  if (!prefix_) return 0;
  const std::size_t evicted = prefix_->evict(positions);
  update_memory_pressure();
  return evicted;
}

PrefixStats KVCache::prefix_stats() const { return prefix_ ? prefix_->stats() : PrefixStats{}; }

void KVCache::reset_counters() {
  sealed_pool_.reset_counters();
  if (prefix_) prefix_->reset_counters();
  nan_inf_replaced_ = 0;
}

void KVCache::set_phase(Phase phase) {
  phase_ = phase;
  if (phase == Phase::Prefill) first_decode_step_ = true;
  sealed_pool_.set_step_kind(phase == Phase::Prefill ? StepKind::Prefill : first_decode_step_ ? StepKind::FirstDecode : StepKind::Decode);
}

void KVCache::predict_next(SeqId seq, int layer, const SelectionPlan& plan) {
  LayerPages& state = table_.layer(seq, layer, "KVCache::predict_next");
  if (!sealed_pool_.l2_enabled()) return;
  MemoryAdvisor::remember_ranking(state.ranked, plan);
  if (!advisor_.predicts()) return;
  const std::vector<PageId> predicted = advisor_.predict(state.history, &plan, plan.total_pages, sealed_pages(state));
  sealed_pool_.advise(predicted, prediction_horizon());
  forward_memory_reports();
}

std::vector<const std::vector<PageId>*> KVCache::sealed_pages(const LayerPages& state) {
  std::vector<const std::vector<PageId>*> sealed;
  for (const HeadPages& head : state.heads) sealed.push_back(&head.sealed);
  return sealed;
}

std::uint64_t KVCache::prediction_horizon() const {
  // A layer's next step comes after every other layer's: protect predictions that long.
  return static_cast<std::uint64_t>(config_.geometry.layers) * static_cast<std::uint64_t>(std::max(1, config_.memory.prefetch_lookahead));
}

void KVCache::end_decode_step() {
  first_decode_step_ = false;
  if (phase_ == Phase::Decode) sealed_pool_.set_step_kind(StepKind::Decode);
}

int KVCache::length(SeqId seq, int layer) const { return table_.layer(seq, layer, "KVCache::length").length; }

CacheOutcome KVCache::append(SeqId seq, int layer, const float* k, const float* v, int n_tokens) {
  LayerPages& state = table_.layer(seq, layer, "KVCache::append");
  if (n_tokens < 0) throw InputError("KVCache::append", "n_tokens", "must be >= 0");
  if (n_tokens > config_.geometry.max_seq - state.length) {
    throw InputError("KVCache::append", "n_tokens",
                     "appending " + std::to_string(n_tokens) + " tokens to " + std::to_string(state.length) +
                         " exceeds max_seq " + std::to_string(config_.geometry.max_seq));
  }
  const std::size_t row = static_cast<std::size_t>(config_.geometry.kv_heads) * config_.geometry.head_dim;
  const int block = kAppendBlockPages * config_.page_tokens;
  std::uint64_t replaced = 0;
  // Sealing pages may demote others under memory pressure: that L2 traffic is the append's.
  const TrafficCounters traffic_before = sealed_pool_.traffic();
  for (int done = 0; done < n_tokens; done += block) {
    const int count = std::min(block, n_tokens - done);
    replaced += sealer_.append(state, k + done * row, v + done * row, count);
    if (!tentative(seq)) seal(seq, layer);
  }
  nan_inf_replaced_ += replaced;
  if (telemetry_ != nullptr && replaced > 0) telemetry_->on_nan_inf(layer, replaced);
  if (config_.memory.l1_bytes > 0) update_memory_pressure();
  report_demotions(traffic_before);
  return take_outcome();
}

int KVCache::add_image(SeqId seq, int begin, int end) {
  const char* api = "KVCache::add_image";
  std::vector<LayerPages>& layers = table_.layers(seq, api);
  if (tentative(seq)) throw InputError(api, "seq", "the sequence has tentative tokens: an image belongs to its prompt");
  const int tokens_per_page = config_.page_tokens;
  if (begin < 0 || begin % tokens_per_page != 0) {
    throw InputError(api, "begin", std::to_string(begin) + " is not on a page boundary: an image starts on a fresh page of " +
                                       std::to_string(tokens_per_page) + " tokens");
  }
  if (end <= begin) throw InputError(api, "end", std::to_string(end) + " must be after begin " + std::to_string(begin));
  if (end > config_.geometry.max_seq) {
    throw InputError(api, "end", std::to_string(end) + " is beyond max_seq " + std::to_string(config_.geometry.max_seq));
  }
  // Every layer holds the same images: the first layer's last one is every layer's.
  const std::vector<ImagePages>& known = layers.front().images;
  if (!known.empty() && known.back().last * tokens_per_page > begin) {
    throw InputError(api, "begin", std::to_string(begin) + " lies in an image added before (its pages end at token " +
                                       std::to_string(known.back().last * tokens_per_page) + ")");
  }
  // Its whole pages only: a last page it shares with the text after it stays a text page.
  const ImagePages pages{begin / tokens_per_page, end / tokens_per_page};
  if (pages.count() == 0) return 0;
  const TrafficCounters traffic_before = sealed_pool_.traffic();
  for (std::size_t l = 0; l < layers.size(); ++l) {
    LayerPages& state = layers[l];
    state.images.push_back(pages);
    // Pages already sealed (shared from a cached prefix or a fork's parent) are read-only now;
    // the rest as they seal.
    const std::vector<PageId> sealed_before = mark_image_pages(state, pages.first);
    seal_pages(seq, static_cast<int>(l));
    update_image_layer(state, sealed_before);
  }
  // After every layer's pages are read-only: relief never picks one of them.
  update_memory_pressure();
  report_demotions(traffic_before);
  return pages.count();
}

std::vector<PageId> KVCache::mark_image_pages(LayerPages& state, int from_page) {
  const int sealed = state.sealed_tokens / config_.page_tokens;
  std::vector<PageId> marked;
  for (const ImagePages& image : state.images) {
    const int last = std::min(image.last, sealed);
    for (int p = std::max(image.first, from_page); p < last; ++p) {
      for (HeadPages& head : state.heads) {
        const PageId id = head.sealed[static_cast<std::size_t>(p)];
        sealed_pool_.seal_read_only(id);
        marked.push_back(id);
      }
    }
  }
  return marked;
}

void KVCache::update_image_layer(LayerPages& state, const std::vector<PageId>& marked) {
  // The window's pins first: they leave image pages out (an image is never recent text), and a
  // sink page stays in L1 whatever its tier.
  for (HeadPages& head : state.heads) advisor_.update_pins(state.length, head.sealed, head.pins);
  // Their home is L2: written there as they seal, before relief weighs L1 (text stays in L1).
  if (config_.visual.tier == VisualTier::L2 && !marked.empty()) sealed_pool_.write_out(marked);
}

bool KVCache::seal_pages(SeqId seq, int layer) {
  LayerPages& state = table_.layer(seq, layer, "KVCache::seal_pages");
  // An image's whole pages seal as soon as they fill, however recent: they never change.
  const int full_pages = state.length / config_.page_tokens;
  int through = 0;
  for (const ImagePages& image : state.images) {
    if (full_pages > image.first) through = std::min(full_pages, image.last) * config_.page_tokens;
  }
  const int sealed_before = state.sealed_tokens / config_.page_tokens;
  const Sealer::Sealed sealed = sealer_.seal_ready(seq, layer, phase_, through);
  if (sealed.events.empty()) return false;
  update_image_layer(state, mark_image_pages(state, sealed_before));
  if (telemetry_ != nullptr) {
    for (const PageSealed& event : sealed.events) telemetry_->on_page_sealed(event);
    telemetry_->on_ops(phase_, sealed.ops);
  }
  return true;
}

void KVCache::seal(SeqId seq, int layer) {
  if (seal_pages(seq, layer)) update_memory_pressure();
}

std::vector<std::vector<PageView>> KVCache::page_views(SeqId seq, int layer) const {
  std::vector<std::vector<PageView>> views;
  page_views(seq, layer, views);
  return views;
}

void KVCache::page_views(SeqId seq, int layer, std::vector<std::vector<PageView>>& views) const {
  resident_.all_views(table_.layer(seq, layer, "KVCache::page_views"), views);
}

void KVCache::key_bounds(SeqId seq, int layer, std::vector<HeadKeyBounds>& heads) const {
  const LayerPages& state = table_.layer(seq, layer, "KVCache::key_bounds");
  heads.resize(state.heads.size());
  for (std::size_t h = 0; h < state.heads.size(); ++h) {
    const HeadPages& pages = state.heads[h];
    HeadKeyBounds& out = heads[h];
    out.sealed = pages.summaries.all_bounds();
    out.sealed_pages = pages.sealed.size();
    out.residual.clear();
    for (PageId id : pages.residual) {
      const std::byte* data = residual_pool_.data(id);
      out.add_residual(residual_layout_.at<std::uint16_t>(data, residual_layout_.key_min),
                       residual_layout_.at<std::uint16_t>(data, residual_layout_.key_max), config_.geometry.head_dim);
    }
  }
}

CacheOutcome KVCache::attend(SeqId seq, int layer, const float* q, int n_queries, float* out, const AttendOptions& options) {
  LayerPages& state = table_.layer(seq, layer, "KVCache::attend");
  const int stored = state.length;
  if (n_queries < 1 || n_queries > stored) {
    throw InputError("KVCache::attend", "n_queries",
                     std::to_string(n_queries) + " must be in 1.." + std::to_string(stored) + " (the stored tokens)");
  }
  if (options.importance != nullptr) {
    if (n_queries != 1) throw InputError("KVCache::attend", "importance", "is a decode step's (one query)");
    bool fits = options.importance->size() == state.heads.size();
    for (std::size_t h = 0; fits && h < state.heads.size(); ++h) {
      fits = (*options.importance)[h].size() >= state.heads[h].sealed.size() + state.heads[h].residual.size();
    }
    if (!fits) throw InputError("KVCache::attend", "importance", "needs a row per kv head with a slot for every page");
  }
  const ModelGeometry& g = config_.geometry;
  AttendCallArgs args;
  args.shape = {g.q_heads, g.kv_heads, g.head_dim, config_.softmax_scale};
  args.q = q;
  args.n_queries = n_queries;
  args.out = out;
  args.split_pages = config_.split_pages;
  args.context_tokens = stored;
  args.plan = options.plan;
  args.compensate = options.compensate;
  args.views = options.views;
  args.page_mass = options.page_mass;
  // Importance accumulates attention mass: the selector's when given, else the memory pool's
  // (which needs it only to rank pages under an L1 cap).
  if (args.page_mass == nullptr && n_queries == 1 && (options.importance != nullptr || config_.memory.l1_bytes > 0)) {
    args.page_mass = &cache_page_mass_;
  }
  args.through_l0 = config_.memory.l0_copy && n_queries == 1;  // holds the step's pages while it stages them
  args.repeat_share = config_.test_repeat_attention;
  args.wave_bytes = args.through_l0 ? 0 : stream_batch_bytes(n_queries > 1);
  args.residual_layout = &residual_layout_;
  // L2 traffic of this call: demand loads while its pages are acquired, demotions and
  // prefetches after it.
  const TrafficCounters traffic_before = sealed_pool_.traffic();
  resident_.bind(state);
  resident_.reset_read_bytes();
  call_.run(*kernels_, pool_, resident_, args);
  end_pool_step(seq, state, layer, n_queries == 1, options.plan, n_queries == 1 ? args.page_mass : nullptr, options);
  if (telemetry_ != nullptr) report_attention(state, n_queries, options.plan != nullptr, sealed_pool_.traffic() - traffic_before);
  return take_outcome();
}

void KVCache::report_attention(const LayerPages& state, int n_queries, bool planned, const TrafficCounters& moved) {
  const ModelGeometry& g = config_.geometry;
  const std::vector<std::vector<PageView>>& views = call_.views();
  telemetry_->on_kernel(n_queries <= kMaxVerifyQueries ? KernelKind::Decode : KernelKind::Prefill, kernels_->isa);
  OpCounts ops;
  const auto passes = static_cast<std::uint64_t>(page_passes(n_queries));
  for (const auto& head : views) {
    for (const PageView& page : head) {
      ops.read(Tier::L1, page.layout->k_format, passes * page.layout->k_read_bytes(page.tokens));
      ops.read(Tier::L1, page.layout->v_format, passes * page.layout->v_read_bytes(page.tokens));
    }
  }
  // Multiply-adds, q.k and p.v: every query position against every visible token, or with a
  // plan against the attended tokens (an upper bound for a causal prefill chunk).
  const auto stored = static_cast<std::uint64_t>(state.length);
  std::uint64_t macs = static_cast<std::uint64_t>(n_queries) * (2ull * stored - n_queries + 1) / 2 *
                       static_cast<std::uint64_t>(g.q_heads) * g.head_dim;
  if (planned) {
    std::uint64_t attended = 0;
    for (const auto& head : views) {
      for (const PageView& page : head) attended += static_cast<std::uint64_t>(page.tokens);
    }
    macs = static_cast<std::uint64_t>(n_queries) * attended * static_cast<std::uint64_t>(g.group()) * g.head_dim;
  }
  // Image pages in formats of their own take their share of the multiply-adds in those formats.
  std::uint64_t tokens = 0, visual_tokens = 0;
  if (config_.visual.own) {
    for (const auto& head : views) {
      for (const PageView& page : head) {
        tokens += static_cast<std::uint64_t>(page.tokens);
        if (page.layout == &visual_layout_) visual_tokens += static_cast<std::uint64_t>(page.tokens);
      }
    }
  }
  const std::uint64_t visual_macs = visual_tokens > 0 ? macs / tokens * visual_tokens + macs % tokens * visual_tokens / tokens : 0;
  ops.mac(config_.k_format, macs - visual_macs);
  ops.mac(config_.v_format, macs - visual_macs);
  if (visual_macs > 0) {
    ops.mac(visual_layout_.k_format, visual_macs);
    ops.mac(visual_layout_.v_format, visual_macs);
  }
  ops.softmax_exps = macs / static_cast<std::uint64_t>(g.head_dim);
  ops.write(Tier::L0, config_.k_format, resident_.read_bytes());
  ops.read(Tier::L2, config_.k_format, moved.swap_in_bytes);
  ops.write(Tier::L2, config_.k_format, moved.swap_out_bytes);
  ops.attention_calls = 1;
  ops.attention_queries = static_cast<std::uint64_t>(n_queries);
  if (n_queries == 1) {
    for (const HeadPages& head : state.heads) ops.context_pages += head.sealed.size();
    if (config_.memory.l1_bytes > 0) ops.managed_pages = ops.context_pages;
  }
  ops.demand_pages = moved.demand_loads;
  ops.demand_bytes = moved.demand_bytes;
  ops.prefetch_pages = moved.prefetch_loads;
  ops.prefetch_bytes = moved.prefetch_bytes;
  ops.demand_buffered = moved.buffered_demand;
  ops.demand_waits = moved.demand_waits;
  ops.prefetch_buffered = moved.buffered_prefetch;
  ops.demoted_pages = moved.demotions;
  telemetry_->on_ops(phase_, ops);
}

std::size_t KVCache::stream_batch_bytes(bool prompt) const {
  // Without a cap nothing is ever demoted, so a call may hold every page. With one, a call holds
  // at most half of the room the pinned pages leave (and always at least one page position),
  // so that no phase - a dense prefill chunk over a long context included - holds more than
  // the cap.
  const std::size_t cap = config_.memory.l1_bytes;
  if (cap == 0) return 0;
  // When pinned pages fill the cap (danger), waves shrink to one position each, not to "no limit".
  // A prompt's chunk also leaves room for the pages predicted for the next decode steps
  // (predict_next): streaming the whole context must not push them out.
  const std::size_t kept = sealed_pool_.pinned_bytes() + (prompt ? sealed_pool_.predicted_resident_bytes() : 0);
  return std::max<std::size_t>(1, cap > kept ? (cap - kept) / 2 : 0);
}

void KVCache::truncate(SeqId seq, int new_length) {
  std::vector<LayerPages>& layers = table_.layers(seq, "KVCache::truncate");
  if (tentative(seq)) throw InputError("KVCache::truncate", "seq", "the sequence has tentative tokens: commit or roll them back first");
  int longest = 0;
  for (const LayerPages& layer : layers) longest = std::max(longest, layer.length);
  if (new_length < 0 || new_length > longest) {
    throw InputError("KVCache::truncate", "new_length", std::to_string(new_length) + " must be in 0.." + std::to_string(longest));
  }
  // Before any layer is cut (every layer holds the same images): an image's read-only pages go
  // whole or stay.
  const int tokens_per_page = config_.page_tokens;
  for (const ImagePages& image : layers.front().images) {
    if (new_length > image.first * tokens_per_page && new_length < image.last * tokens_per_page) {
      throw InputError("KVCache::truncate", "new_length",
                       std::to_string(new_length) + " cuts into the read-only pages of the image at tokens " +
                           std::to_string(image.first * tokens_per_page) + ".." + std::to_string(image.last * tokens_per_page) +
                           ": cut before or after them");
    }
  }
  for (std::size_t l = 0; l < layers.size(); ++l) {
    LayerPages& layer = layers[l];
    std::erase_if(layer.images, [&](const ImagePages& image) { return image.first * tokens_per_page >= new_length; });
    if (layer.length <= new_length) continue;
    sealer_.truncate(seq, static_cast<int>(l), new_length);
    layer.history.clear();
    layer.ranked.clear();
    layer.last_kept.clear();
    for (HeadPages& head : layer.heads) advisor_.update_pins(layer.length, head.sealed, head.pins);
  }
  update_memory_pressure();
}

CacheStats KVCache::stats() const {
  CacheStats stats;
  stats.sealed_pages = sealed_pool_.live_pages();
  stats.read_only_pages = sealed_pool_.read_only_pages();
  stats.residual_pages = residual_pool_.live_pages();
  stats.sealed_bytes = stats.sealed_pages * layout_.bytes;
  stats.residual_bytes = stats.residual_pages * residual_layout_.bytes;
  stats.peak_sealed_bytes = sealed_pool_.peak_live_pages() * layout_.bytes;
  stats.nan_inf_replaced = nan_inf_replaced_;
  stats.memory = sealed_pool_.stats();
  return stats;
}

}  // namespace kv
