#include "sealer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "quant/fp16.h"
#include "quant/quantizer.h"
#include "runtime/clock.h"

namespace kv {

namespace {

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

Sealer::Sealer(const CacheConfig& config, Layouts layouts, PageTable& table, TieredPool& sealed, PagePool& residual,
               ThreadPool& pool, Telemetry* telemetry)
    : config_(config),
      layouts_(layouts),
      table_(table),
      sealed_(sealed),
      residual_(residual),
      pool_(pool),
      telemetry_(telemetry),
      calibration_(static_cast<std::size_t>(config.geometry.layers) * config.geometry.kv_heads,
                   Calibration(config.outlier_factor)),
      visual_calibration_(layouts.visual != nullptr ? calibration_.size() : 0, Calibration(config.outlier_factor)) {}

std::uint64_t Sealer::append(LayerPages& state, const float* k, const float* v, int n_tokens) {
  const PageLayout& layout = *layouts_.residual;
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
      std::byte* page = residual_.data(head.residual[page_index]);
      const std::size_t src = (static_cast<std::size_t>(i) * heads + h) * dim;
      const std::size_t dst = static_cast<std::size_t>(slot) * dim;
      float* key = layout.at<float>(page, layout.k_data) + dst;
      replaced += copy_finite(k + src, key, dim);
      replaced += copy_finite(v + src, layout.at<float>(page, layout.v_data) + dst, dim);
      widen_key_bounds(page, key);
      PageLayout::header(page)->tokens = static_cast<std::uint16_t>(slot + 1);
    }
    ++state.length;
  }
  return replaced;
}

PageId Sealer::new_residual_page() {
  const PageId id = residual_.allocate();
  std::byte* page = residual_.data(id);
  std::memset(page, 0, sizeof(PageHeader));
  clear_key_bounds(page);
  return id;
}

void Sealer::clear_key_bounds(std::byte* page) const {
  const PageLayout& layout = *layouts_.residual;
  // Empty bounds: +inf minima and -inf maxima, widened as tokens arrive.
  auto* lo = layout.at<std::uint16_t>(page, layout.key_min);
  auto* hi = layout.at<std::uint16_t>(page, layout.key_max);
  std::fill(lo, lo + config_.geometry.head_dim, std::uint16_t{0x7C00});
  std::fill(hi, hi + config_.geometry.head_dim, std::uint16_t{0xFC00});
}

void Sealer::widen_key_bounds(std::byte* page, const float* key) const {
  const PageLayout& layout = *layouts_.residual;
  auto* lo = layout.at<std::uint16_t>(page, layout.key_min);
  auto* hi = layout.at<std::uint16_t>(page, layout.key_max);
  for (int c = 0; c < config_.geometry.head_dim; ++c) {
    if (key[c] < f16_to_f32(lo[c])) lo[c] = f32_to_f16_down(key[c]);
    if (key[c] > f16_to_f32(hi[c])) hi[c] = f32_to_f16_up(key[c]);
  }
}

void Sealer::seal_page(int layer, int head, int logical_page, Phase phase, FrameClass cls, PageId residual, PageId sealed,
                       PageSealed& event, std::uint16_t* means) {
  const PageLayout& from = *layouts_.residual;
  const bool visual = cls == FrameClass::Visual;
  const PageLayout& to = visual ? *layouts_.visual : *layouts_.sealed;
  const std::byte* src = residual_.data(residual);
  std::byte* dst = sealed_.frame(sealed);
  const float* k = from.at<float>(src, from.k_data);
  const float* v = from.at<float>(src, from.v_data);
  page_means(k, v, config_.page_tokens, config_.geometry.head_dim, means);
  PageStats stats;
  quantize_page(to, k, v, config_.page_tokens, dst, &stats);
  const std::size_t at = static_cast<std::size_t>(layer) * config_.geometry.kv_heads + static_cast<std::size_t>(head);
  Calibration& calibration = visual ? visual_calibration_[at] : calibration_[at];
  event.layer = layer;
  event.kv_head = head;
  event.logical_page = logical_page;
  event.phase = phase;
  event.health = calibration.observe(stats, k, v, config_.page_tokens, to.v_group, phase == Phase::Prefill);
  PageHeader* header = PageLayout::header(dst);
  header->version = sealed_.version(sealed);
  header->checksum = page_checksum(to, dst);
}

Sealer::Sealed Sealer::seal_ready(SeqId seq, int layer, Phase phase, int through_tokens) {
  LayerPages& state = table_.layer(seq, layer, "KVCache::append");
  const int tokens_per_page = config_.page_tokens;
  const int through = std::min(through_tokens, state.length);
  const int ready = std::max({0, (state.length - state.sealed_tokens - config_.residual_tokens) / tokens_per_page,
                              (through - state.sealed_tokens) / tokens_per_page});
  Sealed sealed;
  if (ready == 0) return sealed;
  const int heads = config_.geometry.kv_heads;
  // The pool is single-threaded: allocate destinations first, quantize in parallel per head
  // (each head's calibration sees its pages in order), then report in a fixed order.
  std::vector<PageId> targets(static_cast<std::size_t>(heads) * ready);
  const int first_logical = state.sealed_tokens / tokens_per_page;
  // Which of the pages are an image's whole pages (KVCache::add_image declared them).
  std::vector<bool> image(static_cast<std::size_t>(ready), false);
  int image_pages = 0;
  for (const ImagePages& pages : state.images) {
    for (int p = std::max(pages.first, first_logical); p < std::min(pages.last, first_logical + ready); ++p) {
      image[static_cast<std::size_t>(p - first_logical)] = true;
      ++image_pages;
    }
  }
  const bool visual = layouts_.visual != nullptr;
  const auto class_of = [&](int p) { return visual && image[static_cast<std::size_t>(p)] ? FrameClass::Visual : FrameClass::Page; };
  const std::uint64_t alloc_start = telemetry_ != nullptr ? monotonic_ns() : 0;
  const int visual_pages = visual ? image_pages : 0;
  sealed_.make_room(static_cast<std::size_t>(heads) * (static_cast<std::size_t>(ready - visual_pages) * sealed_.class_bytes(FrameClass::Page) +
                                                        static_cast<std::size_t>(visual_pages) * sealed_.class_bytes(FrameClass::Visual)));
  for (std::size_t slot = 0; slot < targets.size(); ++slot) targets[slot] = sealed_.allocate(class_of(static_cast<int>(slot % ready)));
  const std::uint64_t quant_start = telemetry_ != nullptr ? monotonic_ns() : 0;
  sealed.events.resize(targets.size());
  const auto summary = 2 * static_cast<std::size_t>(config_.geometry.head_dim);
  std::vector<std::uint16_t> means(targets.size() * summary);
  pool_.parallel_for(static_cast<std::size_t>(heads), [&](std::size_t h) {
    const HeadPages& head = state.heads[h];
    for (int p = 0; p < ready; ++p) {
      const std::size_t slot = h * static_cast<std::size_t>(ready) + static_cast<std::size_t>(p);
      seal_page(layer, static_cast<int>(h), first_logical + p, phase, class_of(p), head.residual[static_cast<std::size_t>(p)],
                targets[slot], sealed.events[slot], means.data() + slot * summary);
    }
  });
  if (telemetry_ != nullptr) {
    const std::uint64_t quant_end = monotonic_ns();
    telemetry_->on_span(phase, Span::PageAlloc, quant_start - alloc_start);
    telemetry_->on_span(phase, Span::KvQuant, quant_end - quant_start);
  }
  for (int h = 0; h < heads; ++h) {
    HeadPages& head = state.heads[static_cast<std::size_t>(h)];
    for (int p = 0; p < ready; ++p) {
      const std::size_t slot = static_cast<std::size_t>(h) * ready + p;
      table_.push_sealed(seq, layer, h, targets[slot], *layouts_.of(class_of(p)), means.data() + slot * summary);
      residual_.release(head.residual[static_cast<std::size_t>(p)]);
    }
    head.residual.erase(head.residual.begin(), head.residual.begin() + ready);
  }
  state.sealed_tokens += ready * tokens_per_page;
  const auto pages = static_cast<std::uint64_t>(targets.size());
  sealed.ops.read(Tier::L1, Format::F32, pages * layouts_.residual->k_read_bytes(tokens_per_page) * 2);
  const auto count_writes = [&](const PageLayout& layout, std::uint64_t n) {
    if (n == 0) return;
    sealed.ops.write(Tier::L1, layout.k_format, n * layout.k_read_bytes(tokens_per_page));
    sealed.ops.write(Tier::L1, layout.v_format, n * layout.v_read_bytes(tokens_per_page));
    const std::uint64_t values = n * static_cast<std::uint64_t>(tokens_per_page) * config_.geometry.head_dim;
    sealed.ops.quantized_values[static_cast<int>(layout.k_format)] += values;
    sealed.ops.quantized_values[static_cast<int>(layout.v_format)] += values;
  };
  const auto visual_sealed = static_cast<std::uint64_t>(heads) * static_cast<std::uint64_t>(visual_pages);
  count_writes(*layouts_.sealed, pages - visual_sealed);
  if (visual) count_writes(*layouts_.visual, visual_sealed);
  return sealed;
}

void Sealer::truncate(SeqId seq, int layer, int new_length) {
  LayerPages& state = table_.layer(seq, layer, "KVCache::truncate");
  const PageLayout& residual = *layouts_.residual;
  const int tokens_per_page = config_.page_tokens;
  if (new_length >= state.sealed_tokens) {
    const int kept = new_length - state.sealed_tokens;
    const auto pages = static_cast<std::size_t>((kept + tokens_per_page - 1) / tokens_per_page);
    for (HeadPages& head : state.heads) {
      while (head.residual.size() > pages) {
        residual_.release(head.residual.back());
        head.residual.pop_back();
      }
      if (pages > 0) {
        const int last = kept - static_cast<int>(pages - 1) * tokens_per_page;
        std::byte* page = residual_.data(head.residual.back());
        PageLayout::header(page)->tokens = static_cast<std::uint16_t>(last);
        // The bounds cover the kept tokens only, as if the cut ones had never arrived.
        clear_key_bounds(page);
        const auto dim = static_cast<std::size_t>(config_.geometry.head_dim);
        for (int t = 0; t < last; ++t) widen_key_bounds(page, residual.at<float>(page, residual.k_data) + static_cast<std::size_t>(t) * dim);
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
  for (std::size_t h = 0; h < state.heads.size(); ++h) {
    HeadPages& head = state.heads[h];
    for (PageId id : head.residual) residual_.release(id);
    head.residual.clear();
    if (kept > 0) {
      const PageId id = new_residual_page();
      std::byte* dst = residual_.data(id);
      std::vector<const std::byte*> frame;
      const PageId source = head.sealed[static_cast<std::size_t>(page)];
      sealed_.acquire({source}, frame);
      const PageView src{layouts_.of(sealed_.frame_class(source)), frame[0], tokens_per_page};
      for (int t = 0; t < kept; ++t) {
        float* key = residual.at<float>(dst, residual.k_data) + t * dim;
        dequantize_k_row_ref(src, t, key);
        dequantize_v_row_ref(src, t, residual.at<float>(dst, residual.v_data) + t * dim);
        widen_key_bounds(dst, key);
      }
      sealed_.release_acquired();
      PageLayout::header(dst)->tokens = static_cast<std::uint16_t>(kept);
      head.residual.push_back(id);
    }
    table_.truncate_sealed(seq, layer, static_cast<int>(h), static_cast<std::size_t>(page));
  }
  state.sealed_tokens = page * tokens_per_page;
  state.length = new_length;
}

}  // namespace kv
