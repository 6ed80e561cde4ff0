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

// K, integer formats: per channel, asymmetric. The offset is a float (the channel minimum),
// so it can sit outside the code range: post-RoPE key ranges often do not contain 0.
void quantize_k_integer(const PageLayout& layout, const float* k, int tokens, std::byte* page) {
  const int dim = layout.head_dim;
  const int max_code = format_max_code(layout.k_format);
  float* scale = layout.at<float>(page, layout.k_scale);
  float* zero = layout.at<float>(page, layout.k_zero);
  for (int c = 0; c < dim; ++c) {
    float lo = std::numeric_limits<float>::infinity();
    float hi = -std::numeric_limits<float>::infinity();
    for (int t = 0; t < tokens; ++t) {
      lo = std::min(lo, k[t * dim + c]);
      hi = std::max(hi, k[t * dim + c]);
    }
    zero[c] = lo;
    scale[c] = (hi - lo) / static_cast<float>(max_code);
  }
  auto* rows = layout.at<std::uint8_t>(page, layout.k_data);
  for (int t = 0; t < tokens; ++t) {
    std::uint8_t* row = rows + static_cast<std::size_t>(t) * layout.k_row_bytes();
    for (int c = 0; c < dim; ++c) {
      const float inv = scale[c] > 0.0f ? 1.0f / scale[c] : 0.0f;
      store_code(row, c, round_clamp((k[t * dim + c] - zero[c]) * inv, max_code), layout.k_format);
    }
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
  for (int t = 0; t < tokens; ++t) {
    std::uint8_t* row = rows + static_cast<std::size_t>(t) * layout.v_row_bytes();
    for (int g = 0; g < groups; ++g) {
      const float* x = v + t * dim + g * layout.v_group;
      float absmax = 0.0f;
      for (int c = 0; c < layout.v_group; ++c) absmax = std::max(absmax, std::fabs(x[c]));
      const float wanted = std::min(absmax / midpoint, kMaxHalf);
      const std::uint16_t scale_bits = f32_to_f16_up(wanted);
      scales[t * groups + g] = scale_bits;
      const float scale = f16_to_f32(scale_bits);
      const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
      for (int c = 0; c < layout.v_group; ++c) {
        store_code(row, g * layout.v_group + c, round_clamp(x[c] * inv + midpoint, max_code), layout.v_format);
      }
    }
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

void collect_stats(const PageLayout& layout, const float* k, const float* v, int tokens, PageStats* stats) {
  const int dim = layout.head_dim;
  stats->k_min.assign(static_cast<std::size_t>(dim), std::numeric_limits<float>::infinity());
  stats->k_max.assign(static_cast<std::size_t>(dim), -std::numeric_limits<float>::infinity());
  stats->v_group_absmax.assign(static_cast<std::size_t>(layout.v_groups()), 0.0f);
  for (int t = 0; t < tokens; ++t) {
    for (int c = 0; c < dim; ++c) {
      stats->k_min[c] = std::min(stats->k_min[c], k[t * dim + c]);
      stats->k_max[c] = std::max(stats->k_max[c], k[t * dim + c]);
      float& group_max = stats->v_group_absmax[c / layout.v_group];
      group_max = std::max(group_max, std::fabs(v[t * dim + c]));
    }
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

  if (is_integer_format(layout.k_format)) {
    quantize_k_integer(layout, k, tokens, page);
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
  if (stats != nullptr) collect_stats(layout, k, v, tokens, stats);
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
        out[c] = zero[c] + static_cast<float>(load_code(row, c, layout.k_format)) * scale[c];
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
        out[c] = (static_cast<float>(load_code(row, c, layout.v_format)) - midpoint) * scale;
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
