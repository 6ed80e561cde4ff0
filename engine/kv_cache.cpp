#include "kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <string>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "attention/compensation.h"
#include "attention/l0_staging.h"
#include "attention/softmax_state.h"
#include "memory/memory_advisor.h"
#include "quant/fp16.h"
#include "quant/quantizer.h"
#include "runtime/clock.h"
#include "runtime/error.h"

namespace kv {

namespace {

constexpr std::size_t kPagesPerSlab = 64;
constexpr int kAppendBlockPages = 16;  // tokens copied into the residual between sealing passes

PageLayoutSpec layout_spec(const CacheConfig& config, Format k, Format v) {
  PageLayoutSpec spec;
  spec.page_tokens = config.page_tokens;
  spec.head_dim = config.geometry.head_dim;
  spec.k_format = k;
  spec.v_format = v;
  spec.v_group = config.v_group;
  spec.pad_to_4k = config.pad_pages_to_4k;
  return spec;
}

std::size_t page_alignment(const CacheConfig& config) {
  return config.pad_pages_to_4k ? kDirectIoAlign : kPageAlign;
}

std::uint64_t page_checksum(const PageLayout& layout, const std::byte* page) {
  return XXH64(page + sizeof(PageHeader), layout.bytes - sizeof(PageHeader), 0);
}

// Copies one row, replacing non-finite values by 0; returns how many were replaced.
std::uint64_t copy_finite(const float* src, float* dst, int count) {
  std::uint64_t replaced = 0;
  for (int i = 0; i < count; ++i) {
    const bool finite = std::isfinite(src[i]);
    dst[i] = finite ? src[i] : 0.0f;
    replaced += finite ? 0 : 1;
  }
  return replaced;
}

}  // namespace

L1Minimum minimum_l1_bytes(const CacheConfig& config, int context_tokens) {
  const ModelGeometry& g = config.geometry;
  const int page = config.page_tokens;
  const auto pages_of = [page](int tokens) { return tokens > 0 ? (tokens + page - 1) / page : 0; };
  const int context_pages = pages_of(context_tokens);
  L1Minimum m;
  // The residual holds the newest residual_tokens beside the open page; sealed pages pinned are
  // the sinks' and those of the window the residual does not cover (one more where the window
  // does not start on a page boundary).
  m.residual_pages = pages_of(config.residual_tokens) + 1;
  const int window = std::max(0, config.memory.pin_window_tokens - config.residual_tokens);
  m.pinned_pages = std::min(context_pages, pages_of(config.memory.pin_sink_tokens) + (window > 0 ? pages_of(window) + 1 : 0));
  const std::size_t summaries = static_cast<std::size_t>(context_pages) * 4 * static_cast<std::size_t>(g.head_dim) * 2;
  const std::size_t page_bytes = PageLayout::make(layout_spec(config, config.k_format, config.v_format)).bytes;
  const std::size_t residual_bytes = PageLayout::make(layout_spec(config, Format::F32, Format::F32)).bytes;
  const std::size_t per_head = static_cast<std::size_t>(m.pinned_pages) * page_bytes +
                               static_cast<std::size_t>(m.residual_pages) * residual_bytes + summaries;
  // An attention call streams its pages in waves of half the room left: room for two page
  // positions (a page of every kv head each) lets a wave hold one.
  m.bytes = per_head * static_cast<std::size_t>(g.kv_heads) * static_cast<std::size_t>(g.layers) +
            2 * static_cast<std::size_t>(g.kv_heads) * page_bytes;
  return m;
}

void validate_cache_config(const CacheConfig& config) {
  const std::string where = "cache config";
  validate_geometry(config.geometry, where);
  PageLayout::make(layout_spec(config, config.k_format, config.v_format));
  if (config.residual_tokens < 0) {
    throw InputError(where, "residual_tokens", std::to_string(config.residual_tokens) + " must be >= 0");
  }
  if (config.threads < 0) throw InputError(where, "threads", "must be >= 0 (0 means all cores)");
  if (config.split_pages < 1) throw InputError(where, "split_pages", "must be >= 1");
  if (!(config.outlier_factor > 1.0f)) throw InputError(where, "outlier_factor", "must be > 1");
  if (config.softmax_scale < 0.0f || !std::isfinite(config.softmax_scale)) {
    throw InputError(where, "softmax_scale", "must be finite and >= 0 (0 means 1/sqrt(head_dim))");
  }
  validate_memory_config(config.memory);
  if (!config.memory.l2.dir.empty()) {
    const PageLayout layout = PageLayout::make(layout_spec(config, config.k_format, config.v_format));
    if (layout.bytes > config.memory.l2.batch_bytes) {
      throw InputError("memory config", "l2_batch_bytes",
                       std::to_string(config.memory.l2.batch_bytes) + " is smaller than one page (" +
                           std::to_string(layout.bytes) + " bytes)");
    }
  }
}

KVCache::KVCache(const CacheConfig& config, Telemetry* telemetry)
    : config_((validate_cache_config(config), config)),
      telemetry_(telemetry),
      layout_(PageLayout::make(layout_spec(config, config.k_format, config.v_format))),
      residual_layout_(PageLayout::make(layout_spec(config, Format::F32, Format::F32))),
      long_tail_layout_(PageLayout::make(layout_spec(config, Format::Q2, Format::Q2))),
      pool_(config.threads),
      kernels_(&page_kernels(resolve_isa(config.isa))),
      sealed_pool_(layout_.bytes, page_alignment(config), config.memory),
      residual_pool_(residual_layout_.bytes, page_alignment(config), kPagesPerSlab),
      calibration_(static_cast<std::size_t>(config.geometry.layers) * config.geometry.kv_heads,
                   Calibration(config.outlier_factor)),
      l0_(config.memory.l0_bytes) {
  if (config_.softmax_scale == 0.0f) config_.softmax_scale = 1.0f / std::sqrt(static_cast<float>(config.geometry.head_dim));
  if (config_.memory.l1_bytes > 0 && long_tail_layout_.bytes < layout_.bytes) {
    sealed_pool_.set_long_tail(long_tail_layout_.bytes);
  }
}

bool KVCache::requantize_page(PageId id) {
  // Danger's long tail: the page's stored values, requantized to INT2 in a smaller frame. The
  // key bounds of the summary index are rewritten from the new page, so selection stays true
  // to what attention reads; the means stay (they summarise the original values).
  for (auto& [seq_id, seq] : sequences_) {
    for (std::size_t l = 0; l < seq.layers.size(); ++l) {
      for (HeadPages& head : seq.layers[l].heads) {
        const auto found = std::find(head.sealed.begin(), head.sealed.end(), id);
        if (found == head.sealed.end()) continue;
        const auto p = static_cast<std::size_t>(found - head.sealed.begin());
        const int tokens = config_.page_tokens;
        const auto dim = static_cast<std::size_t>(config_.geometry.head_dim);
        std::vector<float> k(static_cast<std::size_t>(tokens) * dim), v(k.size());
        std::byte* dst = sealed_pool_.shrink(id);
        const PageView src{&layout_, sealed_pool_.shrink_source(), tokens};
        for (int t = 0; t < tokens; ++t) {
          dequantize_k_row_ref(src, t, k.data() + static_cast<std::size_t>(t) * dim);
          dequantize_v_row_ref(src, t, v.data() + static_cast<std::size_t>(t) * dim);
        }
        PageStats stats;
        quantize_page(long_tail_layout_, k.data(), v.data(), tokens, dst, &stats);
        PageHeader* header = PageLayout::header(dst);
        header->version = sealed_pool_.version(id) + 1;  // even once finish_shrink() returns
        header->checksum = page_checksum(long_tail_layout_, dst);
        const auto* lo = long_tail_layout_.at<std::uint16_t>(dst, long_tail_layout_.key_min);
        const auto* hi = long_tail_layout_.at<std::uint16_t>(dst, long_tail_layout_.key_max);
        std::copy(lo, lo + dim, head.sealed_bounds.begin() + static_cast<std::ptrdiff_t>(p * 2 * dim));
        std::copy(hi, hi + dim, head.sealed_bounds.begin() + static_cast<std::ptrdiff_t>(p * 2 * dim + dim));
        sealed_pool_.finish_shrink(id);
        return true;
      }
    }
  }
  return false;
}

KVCache::~KVCache() = default;

KVCache::Sequence& KVCache::sequence(SeqId seq, const char* api) {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) throw InputError(api, "seq", "unknown sequence " + std::to_string(seq));
  return it->second;
}

const KVCache::Sequence& KVCache::sequence(SeqId seq, const char* api) const {
  auto it = sequences_.find(seq);
  if (it == sequences_.end()) throw InputError(api, "seq", "unknown sequence " + std::to_string(seq));
  return it->second;
}

void KVCache::check_layer(int layer, const char* api) const {
  if (layer < 0 || layer >= config_.geometry.layers) {
    throw InputError(api, "layer",
                     std::to_string(layer) + " is outside 0.." + std::to_string(config_.geometry.layers - 1));
  }
}

SeqId KVCache::create_sequence() {
  const SeqId id = next_seq_++;
  Sequence& seq = sequences_[id];
  seq.layers.resize(static_cast<std::size_t>(config_.geometry.layers));
  for (LayerState& layer : seq.layers) layer.heads.resize(static_cast<std::size_t>(config_.geometry.kv_heads));
  return id;
}

SeqId KVCache::fork(SeqId parent_id) {
  const Sequence parent = sequence(parent_id, "KVCache::fork");
  const SeqId child_id = create_sequence();
  Sequence& child = sequences_[child_id];
  for (std::size_t l = 0; l < parent.layers.size(); ++l) {
    const LayerState& from = parent.layers[l];
    LayerState& to = child.layers[l];
    to.length = from.length;
    to.sealed_tokens = from.sealed_tokens;
    for (std::size_t h = 0; h < from.heads.size(); ++h) {
      to.heads[h].sealed = from.heads[h].sealed;
      to.heads[h].sealed_bounds = from.heads[h].sealed_bounds;
      to.heads[h].sealed_means = from.heads[h].sealed_means;
      for (PageId id : to.heads[h].sealed) sealed_pool_.retain(id);
      to.heads[h].pinned.assign(to.heads[h].sealed.size(), false);
      for (PageId id : from.heads[h].residual) {
        const PageId copy = residual_pool_.allocate();
        std::memcpy(residual_pool_.data(copy), residual_pool_.data(id), residual_layout_.bytes);
        to.heads[h].residual.push_back(copy);
      }
    }
    update_pins(to);
  }
  sync_memory();
  return child_id;
}

void KVCache::release_layer(LayerState& state) {
  for (HeadPages& head : state.heads) {
    for (std::size_t p = 0; p < head.sealed.size(); ++p) {
      if (head.pinned[p]) sealed_pool_.unpin(head.sealed[p]);
      sealed_pool_.release(head.sealed[p]);
    }
    for (PageId id : head.residual) residual_pool_.release(id);
    head.sealed.clear();
    head.pinned.clear();
    head.sealed_bounds.clear();
    head.sealed_means.clear();
    head.residual.clear();
  }
  state.length = 0;
  state.sealed_tokens = 0;
}

void KVCache::release(SeqId seq) {
  Sequence& s = sequence(seq, "KVCache::release");
  for (LayerState& layer : s.layers) release_layer(layer);
  sequences_.erase(seq);
  sync_memory();
}

int KVCache::length(SeqId seq, int layer) const {
  check_layer(layer, "KVCache::length");
  return sequence(seq, "KVCache::length").layers[static_cast<std::size_t>(layer)].length;
}

std::uint64_t KVCache::copy_into_residual(LayerState& state, const float* k, const float* v, int n_tokens) {
  const int tokens_per_page = config_.page_tokens;
  const int dim = config_.geometry.head_dim;
  const int heads = config_.geometry.kv_heads;
  std::uint64_t replaced = 0;
  for (int i = 0; i < n_tokens; ++i) {
    const int pos = state.length - state.sealed_tokens;
    const auto page_index = static_cast<std::size_t>(pos / tokens_per_page);
    const int slot = pos % tokens_per_page;
    for (int h = 0; h < heads; ++h) {
      HeadPages& head = state.heads[static_cast<std::size_t>(h)];
      if (page_index == head.residual.size()) head.residual.push_back(new_residual_page());
      std::byte* page = residual_pool_.data(head.residual[page_index]);
      const std::size_t src = (static_cast<std::size_t>(i) * heads + h) * dim;
      const std::size_t dst = static_cast<std::size_t>(slot) * dim;
      float* key = residual_layout_.at<float>(page, residual_layout_.k_data) + dst;
      replaced += copy_finite(k + src, key, dim);
      replaced += copy_finite(v + src, residual_layout_.at<float>(page, residual_layout_.v_data) + dst, dim);
      widen_key_bounds(page, key);
      PageLayout::header(page)->tokens = static_cast<std::uint16_t>(slot + 1);
    }
    ++state.length;
  }
  return replaced;
}

void KVCache::append_summary(HeadPages& head, const std::byte* page, const std::uint16_t* means) const {
  const auto dim = static_cast<std::size_t>(config_.geometry.head_dim);
  const auto* lo = layout_.at<std::uint16_t>(page, layout_.key_min);
  const auto* hi = layout_.at<std::uint16_t>(page, layout_.key_max);
  head.sealed_bounds.insert(head.sealed_bounds.end(), lo, lo + dim);
  head.sealed_bounds.insert(head.sealed_bounds.end(), hi, hi + dim);
  head.sealed_means.insert(head.sealed_means.end(), means, means + 2 * dim);
}

PageId KVCache::new_residual_page() {
  const PageId id = residual_pool_.allocate();
  std::byte* page = residual_pool_.data(id);
  std::memset(page, 0, sizeof(PageHeader));
  // Empty bounds: +inf minima and -inf maxima, widened as tokens arrive.
  auto* lo = residual_layout_.at<std::uint16_t>(page, residual_layout_.key_min);
  auto* hi = residual_layout_.at<std::uint16_t>(page, residual_layout_.key_max);
  std::fill(lo, lo + config_.geometry.head_dim, std::uint16_t{0x7C00});
  std::fill(hi, hi + config_.geometry.head_dim, std::uint16_t{0xFC00});
  return id;
}

void KVCache::widen_key_bounds(std::byte* page, const float* key) {
  auto* lo = residual_layout_.at<std::uint16_t>(page, residual_layout_.key_min);
  auto* hi = residual_layout_.at<std::uint16_t>(page, residual_layout_.key_max);
  for (int c = 0; c < config_.geometry.head_dim; ++c) {
    if (key[c] < f16_to_f32(lo[c])) lo[c] = f32_to_f16_down(key[c]);
    if (key[c] > f16_to_f32(hi[c])) hi[c] = f32_to_f16_up(key[c]);
  }
}

void KVCache::seal_page(int layer, int head, int logical_page, PageId residual, PageId sealed, PageSealed& event,
                        std::uint16_t* means) {
  const std::byte* src = residual_pool_.data(residual);
  std::byte* dst = sealed_pool_.frame(sealed);
  const float* k = residual_layout_.at<float>(src, residual_layout_.k_data);
  const float* v = residual_layout_.at<float>(src, residual_layout_.v_data);
  const int dim = config_.geometry.head_dim;
  for (int c = 0; c < dim; ++c) {  // mean key and value of the page (compensation)
    float k_sum = 0.0f, v_sum = 0.0f;
    for (int t = 0; t < config_.page_tokens; ++t) {
      k_sum += k[t * dim + c];
      v_sum += v[t * dim + c];
    }
    means[c] = f32_to_f16(k_sum / static_cast<float>(config_.page_tokens));
    means[dim + c] = f32_to_f16(v_sum / static_cast<float>(config_.page_tokens));
  }
  PageStats stats;
  quantize_page(layout_, k, v, config_.page_tokens, dst, &stats);
  Calibration& calibration = calibration_[static_cast<std::size_t>(layer) * config_.geometry.kv_heads + head];
  event.layer = layer;
  event.kv_head = head;
  event.logical_page = logical_page;
  event.phase = phase_;
  event.health = calibration.observe(stats, k, v, config_.page_tokens, layout_.v_group, phase_ == Phase::Prefill);
  PageHeader* header = PageLayout::header(dst);
  header->version = sealed_pool_.version(sealed);
  header->checksum = page_checksum(layout_, dst);
}

void KVCache::seal_ready_pages(LayerState& state, int layer) {
  const int tokens_per_page = config_.page_tokens;
  const int ready = std::max(0, (state.length - state.sealed_tokens - config_.residual_tokens) / tokens_per_page);
  if (ready == 0) return;
  const int heads = config_.geometry.kv_heads;
  // The pool is single-threaded: allocate destinations first, quantize in parallel per head
  // (each head's calibration sees its pages in order), then report in a fixed order.
  std::vector<PageId> targets(static_cast<std::size_t>(heads) * ready);
  const std::uint64_t alloc_start = telemetry_ != nullptr ? monotonic_ns() : 0;
  sealed_pool_.make_room(targets.size());
  for (PageId& id : targets) id = sealed_pool_.allocate();
  const std::uint64_t quant_start = telemetry_ != nullptr ? monotonic_ns() : 0;
  std::vector<PageSealed> events(targets.size());
  const auto summary = 2 * static_cast<std::size_t>(config_.geometry.head_dim);
  std::vector<std::uint16_t> means(targets.size() * summary);
  const int first_logical = state.sealed_tokens / tokens_per_page;
  pool_.parallel_for(static_cast<std::size_t>(heads), [&](std::size_t h) {
    HeadPages& head = state.heads[h];
    for (int p = 0; p < ready; ++p) {
      const std::size_t slot = h * static_cast<std::size_t>(ready) + static_cast<std::size_t>(p);
      seal_page(layer, static_cast<int>(h), first_logical + p, head.residual[static_cast<std::size_t>(p)], targets[slot],
                events[slot], means.data() + slot * summary);
    }
  });
  if (telemetry_ != nullptr) {
    const std::uint64_t quant_end = monotonic_ns();
    telemetry_->on_span(phase_, Span::PageAlloc, quant_start - alloc_start);
    telemetry_->on_span(phase_, Span::KvQuant, quant_end - quant_start);
  }
  for (int h = 0; h < heads; ++h) {
    HeadPages& head = state.heads[static_cast<std::size_t>(h)];
    for (int p = 0; p < ready; ++p) {
      head.sealed.push_back(targets[static_cast<std::size_t>(h) * ready + p]);
      head.pinned.push_back(false);
      append_summary(head, sealed_pool_.frame(head.sealed.back()),
                     means.data() + (static_cast<std::size_t>(h) * ready + p) * summary);
      residual_pool_.release(head.residual[static_cast<std::size_t>(p)]);
    }
    head.residual.erase(head.residual.begin(), head.residual.begin() + ready);
  }
  state.sealed_tokens += ready * tokens_per_page;
  update_pins(state);
  sync_memory();
  if (telemetry_ != nullptr) {
    for (const PageSealed& event : events) telemetry_->on_page_sealed(event);
    OpCounts ops;
    const auto pages = static_cast<std::uint64_t>(targets.size());
    ops.read(Tier::L1, Format::F32, pages * residual_layout_.k_read_bytes(tokens_per_page) * 2);
    ops.write(Tier::L1, config_.k_format, pages * layout_.k_read_bytes(tokens_per_page));
    ops.write(Tier::L1, config_.v_format, pages * layout_.v_read_bytes(tokens_per_page));
    const std::uint64_t values = pages * static_cast<std::uint64_t>(tokens_per_page) * config_.geometry.head_dim;
    ops.quantized_values[static_cast<int>(config_.k_format)] += values;
    ops.quantized_values[static_cast<int>(config_.v_format)] += values;
    telemetry_->on_ops(phase_, ops);
  }
}

void KVCache::append(SeqId seq, int layer, const float* k, const float* v, int n_tokens) {
  check_layer(layer, "KVCache::append");
  LayerState& state = sequence(seq, "KVCache::append").layers[static_cast<std::size_t>(layer)];
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
    replaced += copy_into_residual(state, k + done * row, v + done * row, count);
    seal_ready_pages(state, layer);
  }
  nan_inf_replaced_ += replaced;
  if (telemetry_ != nullptr && replaced > 0) telemetry_->on_nan_inf(layer, replaced);
  if (config_.memory.l1_bytes > 0) sync_memory();
  const TrafficCounters moved = sealed_pool_.traffic() - traffic_before;
  if (telemetry_ != nullptr && moved.demotions != 0) {
    OpCounts ops;
    ops.write(Tier::L2, config_.k_format, moved.swap_out_bytes);
    ops.demoted_pages = moved.demotions;
    telemetry_->on_ops(phase_, ops);
  }
}

std::vector<std::vector<PageView>> KVCache::page_views(SeqId seq, int layer) const {
  std::vector<std::vector<PageView>> views;
  page_views(seq, layer, views);
  return views;
}

PageView KVCache::view_of(const LayerState& state, std::size_t head, std::size_t page) const {
  const HeadPages& pages = state.heads[head];
  if (page < pages.sealed.size()) {
    const std::size_t stride = 2 * static_cast<std::size_t>(config_.geometry.head_dim);
    const TieredPool::Residence where = sealed_pool_.residence(pages.sealed[page]);
    return {where.small ? &long_tail_layout_ : &layout_, where.frame, config_.page_tokens,
            pages.sealed_bounds.data() + page * stride, static_cast<int>(page) * config_.page_tokens,
            pages.sealed_means.data() + page * stride};
  }
  const std::size_t open = page - pages.sealed.size();
  const std::byte* data = residual_pool_.data(pages.residual[open]);
  return {&residual_layout_, data, PageLayout::header(data)->tokens, nullptr,
          state.sealed_tokens + static_cast<int>(open) * config_.page_tokens};
}

void KVCache::page_views(SeqId seq, int layer, std::vector<std::vector<PageView>>& views) const {
  check_layer(layer, "KVCache::page_views");
  const LayerState& state = sequence(seq, "KVCache::page_views").layers[static_cast<std::size_t>(layer)];
  views.resize(state.heads.size());
  for (std::size_t h = 0; h < state.heads.size(); ++h) {
    const std::size_t pages = state.heads[h].sealed.size() + state.heads[h].residual.size();
    views[h].clear();
    views[h].reserve(pages);
    for (std::size_t p = 0; p < pages; ++p) views[h].push_back(view_of(state, h, p));
  }
}

void KVCache::key_bounds(SeqId seq, int layer, std::vector<HeadKeyBounds>& heads) const {
  check_layer(layer, "KVCache::key_bounds");
  const LayerState& state = sequence(seq, "KVCache::key_bounds").layers[static_cast<std::size_t>(layer)];
  heads.resize(state.heads.size());
  for (std::size_t h = 0; h < state.heads.size(); ++h) {
    const HeadPages& pages = state.heads[h];
    HeadKeyBounds& out = heads[h];
    out.sealed = pages.sealed_bounds.data();
    out.sealed_pages = pages.sealed.size();
    out.residual.clear();
    for (PageId id : pages.residual) {
      const std::byte* data = residual_pool_.data(id);
      out.add_residual(residual_layout_.at<std::uint16_t>(data, residual_layout_.key_min),
                       residual_layout_.at<std::uint16_t>(data, residual_layout_.key_max), config_.geometry.head_dim);
    }
  }
}

void KVCache::attend(SeqId seq, int layer, const float* q, int n_queries, float* out, const AttendOptions& options) {
  const SelectionPlan* plan = options.plan;
  std::vector<std::vector<float>>* page_mass = options.page_mass;
  check_layer(layer, "KVCache::attend");
  LayerState& state = sequence(seq, "KVCache::attend").layers[static_cast<std::size_t>(layer)];
  const int stored = state.length;
  if (n_queries < 1 || n_queries > stored) {
    throw InputError("KVCache::attend", "n_queries",
                     std::to_string(n_queries) + " must be in 1.." + std::to_string(stored) + " (the stored tokens)");
  }
  // The attended pages: a plan's alone, or a subset of all of the sequence's pages (the
  // caller's, or built here when the call needs them all).
  const std::vector<std::vector<PageView>>* all = options.views;
  if (all == nullptr && (plan == nullptr || options.compensate)) {
    page_views(seq, layer, all_views_);
    all = &all_views_;
  }
  extra_states_.clear();
  if (plan != nullptr && options.compensate) {
    if (n_queries != 1) throw InputError("KVCache::attend", "compensate", "compensation applies to decode steps");
    compensate_dropped(*plan, q, *all);
  }
  if (plan != nullptr) {
    plan_views(state, *plan, all);
  } else {
    views_ = *all;
  }
  // L2 traffic of this call: demand loads in acquire_pages, demotions and prefetches after it.
  const TrafficCounters traffic_before = sealed_pool_.traffic();
  const ModelGeometry& g = config_.geometry;
  PagedAttentionArgs args;
  args.shape = {g.q_heads, g.kv_heads, g.head_dim, config_.softmax_scale};
  args.pages = &views_;
  args.q = q;
  args.n_queries = n_queries;
  args.out = out;
  args.split_pages = config_.split_pages;
  args.context_tokens = stored;
  args.extra_states = extra_states_.empty() ? nullptr : extra_states_.data();
  const int group = g.group();
  if (page_mass != nullptr && n_queries != 1) {
    throw InputError("KVCache::attend", "page_mass", "page masses are reported for decode steps");
  }
  // The memory pool ranks pages by attention mass when no importance is given.
  if (page_mass == nullptr && n_queries == 1 && options.importance == nullptr && config_.memory.l1_bytes > 0) {
    page_mass = &own_mass_;
  }
  if (page_mass != nullptr) {
    std::size_t total = 0;
    for (const auto& head : views_) total += head.size();
    page_lse_.assign(total * static_cast<std::size_t>(group), 0.0f);
    query_lse_.assign(static_cast<std::size_t>(g.q_heads), 0.0f);
    args.page_lse = page_lse_.data();
    args.query_lse = query_lse_.data();
  }
  step_read_bytes_ = 0;
  try {
    const bool through_l0 = config_.memory.l0_copy && n_queries == 1;  // holds the step's pages while it stages them
    const std::size_t wave_bytes = through_l0 ? 0 : stream_batch_bytes();
    PageWaves waves;
    if (wave_bytes > 0 && sealed_bytes(0, std::numeric_limits<std::size_t>::max()) > wave_bytes) {
      waves.max_bytes = wave_bytes;
      waves.bytes = [this](std::size_t position) { return sealed_bytes(position, position + 1); };
      waves.acquire = [this, &state](std::size_t begin, std::size_t end) { acquire_pages(state, begin, end); };
      waves.release = [this] { sealed_pool_.release_acquired(); };
      args.waves = &waves;
    } else {
      acquire_pages(state, 0, std::numeric_limits<std::size_t>::max());
    }
    if (through_l0) {
      l0_.attend(*kernels_, pool_, args, workspace_);
    } else {
      paged_attention(*kernels_, pool_, args, workspace_);
    }
  } catch (...) {
    sealed_pool_.release_acquired();  // the step's pages are not held past a failed call
    throw;
  }
  if (page_mass != nullptr) {
    // One exp per page and q head: kv heads in parallel.
    page_mass->resize(views_.size());
    mass_offset_.resize(views_.size());
    for (std::size_t h = 0, offset = 0; h < views_.size(); ++h) {
      mass_offset_[h] = offset;
      offset += views_[h].size() * static_cast<std::size_t>(group);
    }
    pool_.parallel_for(views_.size(), [&](std::size_t h) {
      auto& masses = (*page_mass)[h];
      masses.assign(views_[h].size(), 0.0f);
      const float* lse = page_lse_.data() + mass_offset_[h];
      const float* query = query_lse_.data() + h * static_cast<std::size_t>(group);
      for (std::size_t p = 0; p < views_[h].size(); ++p, lse += group) {
        for (int q_in_group = 0; q_in_group < group; ++q_in_group) masses[p] += std::exp(lse[q_in_group] - query[q_in_group]);
      }
    });
  }

  finish_memory_step(state, n_queries == 1, plan, n_queries == 1 ? page_mass : nullptr, options);

  if (telemetry_ != nullptr) {
    telemetry_->on_kernel(n_queries == 1 ? KernelKind::Decode : KernelKind::Prefill, kernels_->isa);
    OpCounts ops;
    const std::uint64_t passes = n_queries == 1 ? 1 : (n_queries + kPrefillQueryBlock - 1) / kPrefillQueryBlock;
    for (const auto& head : views_) {
      for (const PageView& page : head) {
        ops.read(Tier::L1, page.layout->k_format, passes * page.layout->k_read_bytes(page.tokens));
        ops.read(Tier::L1, page.layout->v_format, passes * page.layout->v_read_bytes(page.tokens));
      }
    }
    // Multiply-adds, q.k and p.v: every query position against every visible token, or with a
    // plan against the attended tokens (an upper bound for a causal prefill chunk).
    std::uint64_t macs = static_cast<std::uint64_t>(n_queries) * (2ull * stored - n_queries + 1) / 2 *
                         static_cast<std::uint64_t>(g.q_heads) * g.head_dim;
    if (plan != nullptr) {
      std::uint64_t attended = 0;
      for (const auto& head : views_) {
        for (const PageView& page : head) attended += static_cast<std::uint64_t>(page.tokens);
      }
      macs = static_cast<std::uint64_t>(n_queries) * attended * static_cast<std::uint64_t>(g.group()) * g.head_dim;
    }
    ops.mac(config_.k_format, macs);
    ops.mac(config_.v_format, macs);
    ops.softmax_exps = macs / static_cast<std::uint64_t>(g.head_dim);
    ops.write(Tier::L0, config_.k_format, step_read_bytes_);
    const TrafficCounters moved = sealed_pool_.traffic() - traffic_before;
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
    ops.prefetch_buffered = moved.buffered_prefetch;
    ops.demoted_pages = moved.demotions;
    telemetry_->on_ops(phase_, ops);
  }
}

void KVCache::acquire_pages(const LayerState& state, std::size_t begin, std::size_t end) {
  // The sealed pages at positions [begin, end) of every head, made resident and held.
  step_pages_.clear();
  std::uint64_t bytes = 0;
  for (std::size_t h = 0; h < views_.size(); ++h) {
    for (std::size_t p = begin; p < end && p < views_[h].size(); ++p) {
      const PageView& view = views_[h][p];
      bytes += view.layout->k_read_bytes(view.tokens) + view.layout->v_read_bytes(view.tokens);
      if (view.layout == &residual_layout_) continue;
      step_pages_.push_back(state.heads[h].sealed[static_cast<std::size_t>(view.first_token / config_.page_tokens)]);
    }
  }
  sealed_pool_.acquire(step_pages_, step_frames_);
  std::size_t next = 0;
  for (auto& head : views_) {
    for (std::size_t p = begin; p < end && p < head.size(); ++p) {
      if (head[p].layout != &residual_layout_) head[p].data = step_frames_[next++];
    }
  }
  sealed_pool_.stage_l0(bytes);
  step_read_bytes_ += bytes;
}

std::size_t KVCache::sealed_bytes(std::size_t begin, std::size_t end) const {
  std::size_t bytes = 0;
  for (const auto& head : views_) {
    for (std::size_t p = begin; p < end && p < head.size(); ++p) bytes += head[p].layout == &residual_layout_ ? 0 : head[p].layout->bytes;
  }
  return bytes;
}

std::size_t KVCache::stream_batch_bytes() const {
  // Without a cap nothing is ever demoted, so a call may hold every page. With one, a call holds
  // at most half of the room the pinned pages leave (and always at least one page position),
  // so that no phase - a dense prefill chunk over a long context included - holds more than
  // the cap.
  const std::size_t cap = config_.memory.l1_bytes;
  if (cap == 0) return 0;
  // When pinned pages fill the cap (danger), waves shrink to one position each, not to "no limit".
  const std::size_t pinned = sealed_pool_.pinned_bytes();
  return std::max<std::size_t>(1, cap > pinned ? (cap - pinned) / 2 : 0);
}

void KVCache::finish_memory_step(LayerState& state, bool decode, const SelectionPlan* plan,
                                 const std::vector<std::vector<float>>* mass, const AttendOptions& options) {
  std::vector<PageId> predicted;
  // Importance only ranks pages for demotion, which needs an L1 cap: without one, skip the
  // per-page bookkeeping on every decode step.
  if (decode && config_.memory.l1_bytes > 0 && (mass != nullptr || options.importance != nullptr)) {
    const float decay = config_.memory.importance_decay;
    for (std::size_t h = 0; h < state.heads.size(); ++h) {
      const auto& sealed = state.heads[h].sealed;
      // The selector's accumulated attention (already decayed for this step), else the pool's own.
      if (options.importance != nullptr) {
        const auto& given = (*options.importance)[h];
        for (std::size_t p = 0; p < sealed.size() && p < given.size(); ++p) sealed_pool_.set_importance(sealed[p], given[p]);
      }
      if (mass == nullptr) continue;
      for (std::size_t i = 0; i < views_[h].size(); ++i) {
        const PageView& view = views_[h][i];
        if (view.layout == &residual_layout_) continue;
        const PageId id = sealed[static_cast<std::size_t>(view.first_token / config_.page_tokens)];
        const float before = sealed_pool_.importance(id) * (options.importance != nullptr ? 1.0f : decay);
        sealed_pool_.set_importance(id, before + (*mass)[h][i]);
      }
    }
  }
  const int lookahead = config_.memory.prefetch_lookahead;
  if (sealed_pool_.l2_enabled() && lookahead > 0 && decode) {
    // Selection history: what each kv head read this step, and the runners-up of the plan.
    state.history.push_back(selection_records(plan, state.heads.size(), static_cast<int>(views_[0].size())));
    while (state.history.size() > static_cast<std::size_t>(lookahead) + 1) state.history.pop_front();
    std::vector<const std::vector<PageId>*> sealed;
    for (const HeadPages& head : state.heads) sealed.push_back(&head.sealed);
    predicted = predicted_pages(state.history, lookahead, sealed);
  }
  // A layer's next step comes after every other layer's: protect predictions that long.
  const auto horizon = static_cast<std::uint64_t>(config_.geometry.layers) * static_cast<std::uint64_t>(std::max(1, lookahead));
  apply_relief(sealed_pool_.release_step(predicted, horizon));
  sealed_pool_.finish_step(predicted);
  forward_memory_reports();
}

void KVCache::budget_tightened() {
  sealed_pool_.budget_tightened();
  forward_memory_reports();  // a request served after the run's last step still reaches the sink
}

void KVCache::apply_relief(const TieredPool::Relief& relief) {
  // Danger's first remedy is the sparse policy's, above the cache: a request it serves
  // (budget_requests()); the second, the long tail's requantization, is the cache's own.
  if (relief.tighten_budget) ++budget_requests_;
  if (!relief.requantize) return;
  std::size_t done = 0;
  for (PageId id : relief.pages) done += requantize_page(id) ? 1 : 0;
  sealed_pool_.finish_relief(done);
}

void KVCache::update_pins(LayerState& state) {
  if (config_.memory.l1_bytes == 0) return;  // nothing is ever demoted
  const int tokens_per_page = config_.page_tokens;
  const int window_start = state.length - config_.memory.pin_window_tokens;
  for (HeadPages& head : state.heads) {
    for (std::size_t p = 0; p < head.sealed.size(); ++p) {
      const int first = static_cast<int>(p) * tokens_per_page;
      const bool want = first < config_.memory.pin_sink_tokens || first + tokens_per_page > window_start;
      if (want == head.pinned[p]) continue;
      head.pinned[p] = want;
      if (want) {
        sealed_pool_.pin(head.sealed[p]);
      } else {
        sealed_pool_.unpin(head.sealed[p]);
      }
    }
  }
}

void KVCache::sync_memory() {
  // L1 also holds the full-precision residual and the page-summary index (bounds and means).
  std::size_t summaries = 0;
  for (const auto& [id, seq] : sequences_) {
    for (const LayerState& layer : seq.layers) {
      for (const HeadPages& head : layer.heads) summaries += (head.sealed_bounds.size() + head.sealed_means.size()) * 2;
    }
  }
  sealed_pool_.set_external_bytes(residual_pool_.live_pages() * residual_layout_.bytes + summaries);
  apply_relief(sealed_pool_.relieve_pressure());
  forward_memory_reports();
}

void KVCache::forward_memory_reports() {
  std::vector<MemoryEvent> events = sealed_pool_.take_events();
  std::vector<MemorySample> samples = sealed_pool_.take_samples();
  if (telemetry_ == nullptr) return;
  for (const MemoryEvent& e : events) telemetry_->on_memory_event(e);
  for (const MemorySample& sample : samples) telemetry_->on_memory_sample(sample);
}

void KVCache::plan_views(const LayerState& state, const SelectionPlan& plan, const std::vector<std::vector<PageView>>* all) {
  // The planned pages, picked from the caller's views of all pages or viewed on their own.
  const std::size_t pages = state.heads[0].sealed.size() + state.heads[0].residual.size();
  if (plan.heads.size() != state.heads.size() || static_cast<std::size_t>(plan.total_pages) != pages) {
    throw InputError("KVCache::attend", "plan",
                     "planned for " + std::to_string(plan.total_pages) + " pages, the sequence has " + std::to_string(pages));
  }
  views_.resize(state.heads.size());
  for (std::size_t h = 0; h < state.heads.size(); ++h) {
    views_[h].clear();
    for (int p : plan.heads[h].pages) {
      if (p < 0 || static_cast<std::size_t>(p) >= pages) {
        throw InputError("KVCache::attend", "plan", "page " + std::to_string(p) + " is not one of the sequence's " + std::to_string(pages));
      }
      const auto page = static_cast<std::size_t>(p);
      views_[h].push_back(all != nullptr ? (*all)[h][page] : view_of(state, h, page));
    }
  }
}

void KVCache::compensate_dropped(const SelectionPlan& plan, const float* q,
                                  const std::vector<std::vector<PageView>>& all) {
  const ModelGeometry& g = config_.geometry;
  const int group = g.group();
  const std::size_t stride = SoftmaxState::stride(g.head_dim);
  extra_states_.assign(static_cast<std::size_t>(g.q_heads) * stride, 0.0f);
  for (int h = 0; h < g.kv_heads; ++h) {
    const auto uh = static_cast<std::size_t>(h);
    gather_dropped_pages(all[uh], plan.heads[uh].pages, residual_layout_, g.head_dim, dropped_);
    const std::size_t first = uh * static_cast<std::size_t>(group);
    compensation_states(dropped_, q + first * static_cast<std::size_t>(g.head_dim), group, config_.softmax_scale,
                        extra_states_.data() + first * stride);
  }
}

void KVCache::truncate_layer(LayerState& state, int new_length) {
  const int tokens_per_page = config_.page_tokens;
  if (new_length >= state.sealed_tokens) {
    const int kept = new_length - state.sealed_tokens;
    const auto pages = static_cast<std::size_t>((kept + tokens_per_page - 1) / tokens_per_page);
    for (HeadPages& head : state.heads) {
      while (head.residual.size() > pages) {
        residual_pool_.release(head.residual.back());
        head.residual.pop_back();
      }
      if (pages > 0) {
        const int last = kept - static_cast<int>(pages - 1) * tokens_per_page;
        PageLayout::header(residual_pool_.data(head.residual.back()))->tokens = static_cast<std::uint16_t>(last);
      }
    }
    state.length = new_length;
    return;
  }
  // Reaches into sealed pages: the page holding new_length returns its kept tokens, as
  // stored (dequantized), to a fresh residual page.
  const int page = new_length / tokens_per_page;
  const int kept = new_length % tokens_per_page;
  const auto dim = static_cast<std::size_t>(config_.geometry.head_dim);
  for (HeadPages& head : state.heads) {
    for (PageId id : head.residual) residual_pool_.release(id);
    head.residual.clear();
    if (kept > 0) {
      const PageId id = new_residual_page();
      std::byte* dst = residual_pool_.data(id);
      std::vector<const std::byte*> frame;
      sealed_pool_.acquire({head.sealed[static_cast<std::size_t>(page)]}, frame);
      const PageId source = head.sealed[static_cast<std::size_t>(page)];
      const PageView src{sealed_pool_.small(source) ? &long_tail_layout_ : &layout_, frame[0], tokens_per_page};
      for (int t = 0; t < kept; ++t) {
        float* key = residual_layout_.at<float>(dst, residual_layout_.k_data) + t * dim;
        dequantize_k_row_ref(src, t, key);
        dequantize_v_row_ref(src, t, residual_layout_.at<float>(dst, residual_layout_.v_data) + t * dim);
        widen_key_bounds(dst, key);
      }
      sealed_pool_.release_acquired();
      PageLayout::header(dst)->tokens = static_cast<std::uint16_t>(kept);
      head.residual.push_back(id);
    }
    while (head.sealed.size() > static_cast<std::size_t>(page)) {
      if (head.pinned.back()) sealed_pool_.unpin(head.sealed.back());
      sealed_pool_.release(head.sealed.back());
      head.sealed.pop_back();
      head.pinned.pop_back();
    }
    head.sealed_bounds.resize(head.sealed.size() * 2 * static_cast<std::size_t>(config_.geometry.head_dim));
    head.sealed_means.resize(head.sealed_bounds.size());
  }
  state.sealed_tokens = page * tokens_per_page;
  state.length = new_length;
}

void KVCache::truncate(SeqId seq, int new_length) {
  Sequence& s = sequence(seq, "KVCache::truncate");
  int longest = 0;
  for (const LayerState& layer : s.layers) longest = std::max(longest, layer.length);
  if (new_length < 0 || new_length > longest) {
    throw InputError("KVCache::truncate", "new_length",
                     std::to_string(new_length) + " must be in 0.." + std::to_string(longest));
  }
  for (LayerState& layer : s.layers) {
    if (layer.length > new_length) {
      truncate_layer(layer, new_length);
      layer.history.clear();
      update_pins(layer);
    }
  }
  sync_memory();
}

CacheStats KVCache::stats() const {
  CacheStats stats;
  stats.sealed_pages = sealed_pool_.live_pages();
  stats.residual_pages = residual_pool_.live_pages();
  stats.sealed_bytes = stats.sealed_pages * layout_.bytes;
  stats.residual_bytes = stats.residual_pages * residual_layout_.bytes;
  stats.peak_sealed_bytes = sealed_pool_.peak_live_pages() * layout_.bytes;
  stats.nan_inf_replaced = nan_inf_replaced_;
  stats.memory = sealed_pool_.stats();
  return stats;
}

}  // namespace kv
