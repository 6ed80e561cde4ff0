#include "cache_config.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "runtime/error.h"

namespace kv {

namespace {

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

}  // namespace

PageLayout cache_page_layout(const CacheConfig& config, Format k, Format v) { return PageLayout::make(layout_spec(config, k, v)); }

PageLayout visual_page_layout(const CacheConfig& config) {
  if (!config.visual.own) return cache_page_layout(config, config.k_format, config.v_format);
  PageLayoutSpec spec = layout_spec(config, config.visual.k_format, config.visual.v_format);
  spec.v_group = config.visual.v_group;
  return PageLayout::make(spec);
}

std::size_t cache_page_alignment(const CacheConfig& config) {
  return config.pad_pages_to_4k ? kDirectIoAlign : kPageAlign;
}

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
  const std::size_t page_bytes = cache_page_layout(config, config.k_format, config.v_format).bytes;
  const std::size_t residual_bytes = cache_page_layout(config, Format::F32, Format::F32).bytes;
  const std::size_t per_head = static_cast<std::size_t>(m.pinned_pages) * page_bytes +
                               static_cast<std::size_t>(m.residual_pages) * residual_bytes + summaries;
  // An attention call streams its pages in waves of half the room left: room for two page
  // positions (a page of every kv head each) lets a wave hold one.
  m.bytes = per_head * static_cast<std::size_t>(g.kv_heads) * static_cast<std::size_t>(g.layers) +
            2 * static_cast<std::size_t>(g.kv_heads) * page_bytes;
  return m;
}

CacheConfig serial_config(CacheConfig config) {
  config.serial = true;
  config.threads = 1;
  config.memory.l2.synchronous = true;
  return config;
}

void validate_cache_config(const CacheConfig& config) {
  const std::string where = "cache config";
  validate_geometry(config.geometry, where);
  const PageLayout layout = cache_page_layout(config, config.k_format, config.v_format);
  if (config.residual_tokens < 0) {
    throw InputError(where, "residual_tokens", std::to_string(config.residual_tokens) + " must be >= 0");
  }
  if (config.threads < 0) throw InputError(where, "threads", "must be >= 0 (0 means all cores)");
  if (config.serial && (config.threads != 1 || !config.memory.l2.synchronous)) {
    throw InputError(where, "serial", "a serial cache runs one thread with synchronous L2 I/O (serial_config())");
  }
  if (config.split_pages < 1) throw InputError(where, "split_pages", "must be >= 1");
  if (!(config.test_repeat_attention >= 0.0 && config.test_repeat_attention <= 100.0)) {
    throw InputError(where, "test_repeat_attention", "must be in [0, 100]");
  }
  if (!(config.outlier_factor > 1.0f)) throw InputError(where, "outlier_factor", "must be > 1");
  if (config.softmax_scale < 0.0f || !std::isfinite(config.softmax_scale)) {
    throw InputError(where, "softmax_scale", "must be finite and >= 0 (0 means 1/sqrt(head_dim))");
  }
  validate_memory_config(config.memory);
  std::size_t largest = layout.bytes;
  if (config.visual.own) {
    try {
      largest = std::max(largest, visual_page_layout(config).bytes);
    } catch (const InputError& e) {
      throw InputError(where, "visual." + std::string(e.field()), e.reason());
    }
  }
  if (config.visual.tier == VisualTier::L2 && config.memory.l2.dir.empty()) {
    throw InputError(where, "visual.tier", "l2 needs an L2 tier (memory.l2.dir, with an L1 cap)");
  }
  if (!config.memory.l2.dir.empty() && largest > config.memory.l2.batch_bytes) {
    throw InputError("memory config", "l2_batch_bytes",
                     std::to_string(config.memory.l2.batch_bytes) + " is smaller than one page (" +
                         std::to_string(largest) + " bytes)");
  }
}

}  // namespace kv
