#include "quant/quantizer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "quant/codes.h"
#include "quant/fp16.h"

namespace kv {

namespace {

constexpr float kMaxHalf = 65504.0f;

int round_clamp(float value, int max_code) {
  const auto code = static_cast<int>(std::lrintf(value));
  return std::clamp(code, 0, max_code);
}

constexpr int kMaxDim = 512;

// Packs one row of codes (one per channel) into the format's bit layout (page_layout.h).
void pack_row(const std::uint8_t* codes, int dim, Format format, std::uint8_t* row) {
  switch (format) {
    case Format::Q8: std::memcpy(row, codes, static_cast<std::size_t>(dim)); break;
    case Format::Q4: {  // full blocks of 64 pair channel j with j + 32, the rest 2k with 2k + 1 (codes.h)
      const int full = dim & ~63;
      for (int base = 0; base < full; base += 64) {
        for (int j = 0; j < 32; ++j) {
          row[base / 2 + j] = static_cast<std::uint8_t>(codes[base + j] | (codes[base + 32 + j] << 4));
        }
      }
      for (int i = full / 2; i < dim / 2; ++i) row[i] = static_cast<std::uint8_t>(codes[2 * i] | (codes[2 * i + 1] << 4));
      break;
    }
    case Format::Q2:
      for (int i = 0; i < dim / 4; ++i) {
        row[i] = static_cast<std::uint8_t>(codes[4 * i] | (codes[4 * i + 1] << 2) | (codes[4 * i + 2] << 4) |
                                           (codes[4 * i + 3] << 6));
      }
      break;
    default: break;
  }
}

// K, integer formats: per channel, asymmetric. The offset is a float (the channel minimum),
// so it can sit outside the code range: post-RoPE key ranges often do not contain 0.
void quantize_k_integer(const PageLayout& layout, const float* k, int tokens, const float* lo, const float* hi,
                        std::byte* page) {
  const int dim = layout.head_dim;
  const int max_code = format_max_code(layout.k_format);
  float* scale = layout.at<float>(page, layout.k_scale);
  float* zero = layout.at<float>(page, layout.k_zero);
  float inv[kMaxDim];
  for (int c = 0; c < dim; ++c) {
    zero[c] = lo[c];
    scale[c] = (hi[c] - lo[c]) / static_cast<float>(max_code);
    inv[c] = scale[c] > 0.0f ? 1.0f / scale[c] : 0.0f;
  }
  auto* rows = layout.at<std::uint8_t>(page, layout.k_data);
  std::uint8_t codes[kMaxDim];
  for (int t = 0; t < tokens; ++t) {
    const float* x = k + static_cast<std::size_t>(t) * dim;
    for (int c = 0; c < dim; ++c) codes[c] = static_cast<std::uint8_t>(round_clamp((x[c] - zero[c]) * inv[c], max_code));
    pack_row(codes, dim, layout.k_format, rows + static_cast<std::size_t>(t) * layout.k_row_bytes());
  }
}

// V, integer formats: per token and group, symmetric midrise (see codes.h). The scale is
// stored as f16 rounded up, so the group's absmax never clips.
void quantize_v_integer(const PageLayout& layout, const float* v, int tokens, std::byte* page) {
  const int dim = layout.head_dim;
  const int groups = layout.v_groups();
  const int max_code = format_max_code(layout.v_format);
  const float midpoint = v_code_midpoint(layout.v_format);
  auto* scales = layout.at<std::uint16_t>(page, layout.v_scale);
  auto* rows = layout.at<std::uint8_t>(page, layout.v_data);
  std::uint8_t codes[kMaxDim];
  for (int t = 0; t < tokens; ++t) {
    for (int g = 0; g < groups; ++g) {
      const float* x = v + static_cast<std::size_t>(t) * dim + g * layout.v_group;
      float absmax = 0.0f;
      for (int c = 0; c < layout.v_group; ++c) absmax = std::max(absmax, std::fabs(x[c]));
      const std::uint16_t scale_bits = f32_to_f16_up(std::min(absmax / midpoint, kMaxHalf));
      scales[t * groups + g] = scale_bits;
      const float scale = f16_to_f32(scale_bits);
      const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
      std::uint8_t* out = codes + g * layout.v_group;
      for (int c = 0; c < layout.v_group; ++c) out[c] = static_cast<std::uint8_t>(round_clamp(x[c] * inv + midpoint, max_code));
    }
    pack_row(codes, dim, layout.v_format, rows + static_cast<std::size_t>(t) * layout.v_row_bytes());
  }
}

float absmax_of(const float* x, std::size_t count) {
  float absmax = 0.0f;
  for (std::size_t i = 0; i < count; ++i) absmax = std::max(absmax, std::fabs(x[i]));
  return absmax;
}

// Float formats for one side (K or V): f32 copy, f16, or fp8 with a per-page scale.
void quantize_float(Format format, const float* x, int tokens, int dim, std::uint8_t* rows, float* fp8_scale) {
  const std::size_t count = static_cast<std::size_t>(tokens) * static_cast<std::size_t>(dim);
  switch (format) {
    case Format::F32: std::memcpy(rows, x, count * sizeof(float)); break;
    case Format::F16: {
      auto* out = reinterpret_cast<std::uint16_t*>(rows);
      for (std::size_t i = 0; i < count; ++i) out[i] = f32_to_f16(x[i]);
      break;
    }
    case Format::FP8: {
      const float scale = absmax_of(x, count) / kFp8E4M3Max;
      *fp8_scale = scale;
      const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
      for (std::size_t i = 0; i < count; ++i) rows[i] = f32_to_fp8_e4m3(x[i] * inv);
      break;
    }
    default: break;
  }
}

// Raw K channel ranges (also the integer formats' statistics) and V group absmax.
void collect_stats(const PageLayout& layout, const float* k, const float* v, int tokens, PageStats* stats) {
  const int dim = layout.head_dim;
  stats->k_min.assign(static_cast<std::size_t>(dim), std::numeric_limits<float>::infinity());
  stats->k_max.assign(static_cast<std::size_t>(dim), -std::numeric_limits<float>::infinity());
  stats->v_group_absmax.assign(static_cast<std::size_t>(layout.v_groups()), 0.0f);
  float* lo = stats->k_min.data();
  float* hi = stats->k_max.data();
  for (int t = 0; t < tokens; ++t) {
    const float* x = k + static_cast<std::size_t>(t) * dim;
    for (int c = 0; c < dim; ++c) {
      lo[c] = std::min(lo[c], x[c]);
      hi[c] = std::max(hi[c], x[c]);
    }
  }
  for (int g = 0; g < layout.v_groups(); ++g) {
    float absmax = 0.0f;
    for (int t = 0; t < tokens; ++t) {
      const float* x = v + static_cast<std::size_t>(t) * dim + g * layout.v_group;
      for (int c = 0; c < layout.v_group; ++c) absmax = std::max(absmax, std::fabs(x[c]));
    }
    stats->v_group_absmax[static_cast<std::size_t>(g)] = absmax;
  }
}

// Quest metadata: per-channel min/max over the keys attention will read (dequantized), rounded
// outward to f16 so the upper bound of q.k stays true.
void write_key_bounds(const PageLayout& layout, int tokens, std::byte* page) {
  const int dim = layout.head_dim;
  std::vector<float> lo(static_cast<std::size_t>(dim), std::numeric_limits<float>::infinity());
  std::vector<float> hi(static_cast<std::size_t>(dim), -std::numeric_limits<float>::infinity());
  std::vector<float> row(static_cast<std::size_t>(dim));
  const PageView view{&layout, page, tokens};
  for (int t = 0; t < tokens; ++t) {
    dequantize_k_row_ref(view, t, row.data());
    for (int c = 0; c < dim; ++c) {
      lo[c] = std::min(lo[c], row[c]);
      hi[c] = std::max(hi[c], row[c]);
    }
  }
  auto* key_min = layout.at<std::uint16_t>(page, layout.key_min);
  auto* key_max = layout.at<std::uint16_t>(page, layout.key_max);
  for (int c = 0; c < dim; ++c) {
    key_min[c] = tokens > 0 ? f32_to_f16_down(std::max(lo[c], -kMaxHalf)) : 0;
    key_max[c] = tokens > 0 ? f32_to_f16_up(std::min(hi[c], kMaxHalf)) : 0;
  }
}

}  // namespace

void quantize_page(const PageLayout& layout, const float* k, const float* v, int tokens, std::byte* page,
                   PageStats* stats) {
  std::memset(page, 0, layout.bytes);
  PageHeader* header = PageLayout::header(page);
  header->tokens = static_cast<std::uint16_t>(tokens);
  header->k_format = static_cast<std::uint8_t>(layout.k_format);
  header->v_format = static_cast<std::uint8_t>(layout.v_format);
  PageStats local;
  PageStats& page_stats = stats != nullptr ? *stats : local;
  collect_stats(layout, k, v, tokens, &page_stats);

  if (is_integer_format(layout.k_format)) {
    quantize_k_integer(layout, k, tokens, page_stats.k_min.data(), page_stats.k_max.data(), page);
  } else {
    float* fp8_scale = layout.k_format == Format::FP8 ? layout.at<float>(page, layout.k_scale) : nullptr;
    quantize_float(layout.k_format, k, tokens, layout.head_dim, layout.at<std::uint8_t>(page, layout.k_data), fp8_scale);
  }
  if (is_integer_format(layout.v_format)) {
    quantize_v_integer(layout, v, tokens, page);
  } else {
    float* fp8_scale = layout.v_format == Format::FP8 ? layout.at<float>(page, layout.v_scale) : nullptr;
    quantize_float(layout.v_format, v, tokens, layout.head_dim, layout.at<std::uint8_t>(page, layout.v_data), fp8_scale);
  }
  write_key_bounds(layout, tokens, page);
}

void dequantize_k_row_ref(const PageView& view, int token, float* out) {
  const PageLayout& layout = *view.layout;
  const std::uint8_t* row = layout.k_row(view.data, token);
  const int dim = layout.head_dim;
  switch (layout.k_format) {
    case Format::F32: std::memcpy(out, row, static_cast<std::size_t>(dim) * sizeof(float)); break;
    case Format::F16:
      for (int c = 0; c < dim; ++c) out[c] = f16_to_f32(reinterpret_cast<const std::uint16_t*>(row)[c]);
      break;
    case Format::FP8: {
      const float scale = *layout.at<float>(view.data, layout.k_scale);
      for (int c = 0; c < dim; ++c) out[c] = fp8_e4m3_to_f32(row[c]) * scale;
      break;
    }
    case Format::Q8:
    case Format::Q4:
    case Format::Q2: {
      const float* scale = layout.at<float>(view.data, layout.k_scale);
      const float* zero = layout.at<float>(view.data, layout.k_zero);
      for (int c = 0; c < dim; ++c) {
        out[c] = zero[c] + static_cast<float>(load_code(row, c, layout.k_format, dim)) * scale[c];
      }
      break;
    }
  }
}

void dequantize_v_row_ref(const PageView& view, int token, float* out) {
  const PageLayout& layout = *view.layout;
  const std::uint8_t* row = layout.v_row(view.data, token);
  const int dim = layout.head_dim;
  switch (layout.v_format) {
    case Format::F32: std::memcpy(out, row, static_cast<std::size_t>(dim) * sizeof(float)); break;
    case Format::F16:
      for (int c = 0; c < dim; ++c) out[c] = f16_to_f32(reinterpret_cast<const std::uint16_t*>(row)[c]);
      break;
    case Format::FP8: {
      const float scale = *layout.at<float>(view.data, layout.v_scale);
      for (int c = 0; c < dim; ++c) out[c] = fp8_e4m3_to_f32(row[c]) * scale;
      break;
    }
    case Format::Q8:
    case Format::Q4:
    case Format::Q2: {
      const auto* scales = layout.at<std::uint16_t>(view.data, layout.v_scale);
      const float midpoint = v_code_midpoint(layout.v_format);
      for (int c = 0; c < dim; ++c) {
        const float scale = f16_to_f32(scales[token * layout.v_groups() + c / layout.v_group]);
        out[c] = (static_cast<float>(load_code(row, c, layout.v_format, dim)) - midpoint) * scale;
      }
      break;
    }
  }
}

void dequantize_page_ref(const PageView& view, float* k, float* v) {
  const auto dim = static_cast<std::size_t>(view.layout->head_dim);
  for (int t = 0; t < view.tokens; ++t) {
    dequantize_k_row_ref(view, t, k + static_cast<std::size_t>(t) * dim);
    dequantize_v_row_ref(view, t, v + static_cast<std::size_t>(t) * dim);
  }
}

}  // namespace kv
