// Scalar kernels: run everywhere, fused (no dequantized copy of the page), plain C++.
#include <cmath>
#include <cstring>

#include "attention/page_kernels.h"
#include "attention/prefill_tile_impl.h"
#include "attention/softmax_state.h"
#include "quant/codes.h"
#include "quant/fp16.h"
#include "quant/quantizer.h"

namespace kv::scalar {

namespace {

// The value a K (or V) payload holds before its format's scale is applied: integer codes for
// q8/q4/q2 (V shifted by the midpoint), the E4M3 value for fp8, the value itself otherwise.
float raw_value(const std::uint8_t* row, int c, Format format, int dim) {
  switch (format) {
    case Format::F32: {
      float value;
      std::memcpy(&value, row + 4 * c, sizeof(float));
      return value;
    }
    case Format::F16: {
      std::uint16_t bits;
      std::memcpy(&bits, row + 2 * c, sizeof(bits));
      return f16_to_f32(bits);
    }
    case Format::FP8: return fp8_e4m3_to_f32(row[c]);
    default: return static_cast<float>(load_code(row, c, format, dim));
  }
}

// Folds the K scales into the query: q.k = sum_c q'[c] * raw[c] + bias.
float fold_query(const PageLayout& layout, const std::byte* page, const float* q, float* folded) {
  const int dim = layout.head_dim;
  float bias = 0.0f;
  if (is_integer_format(layout.k_format)) {
    const float* scale = layout.at<float>(page, layout.k_scale);
    const float* zero = layout.at<float>(page, layout.k_zero);
    for (int c = 0; c < dim; ++c) {
      folded[c] = q[c] * scale[c];
      bias += q[c] * zero[c];
    }
  } else {
    const float scale = layout.k_format == Format::FP8 ? *layout.at<float>(page, layout.k_scale) : 1.0f;
    for (int c = 0; c < dim; ++c) folded[c] = q[c] * scale;
  }
  return bias;
}

float v_scale(const PageLayout& layout, const std::byte* page, int token, int group) {
  if (is_integer_format(layout.v_format)) {
    return f16_to_f32(layout.at<std::uint16_t>(page, layout.v_scale)[token * layout.v_groups() + group]);
  }
  return layout.v_format == Format::FP8 ? *layout.at<float>(page, layout.v_scale) : 1.0f;
}

}  // namespace

void decode_page(const PageView& page, const float* q, int group, float* states, float* page_lse) {
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  const float v_midpoint = is_integer_format(layout.v_format) ? v_code_midpoint(layout.v_format) : 0.0f;
  float folded[512];
  float scores[kMaxPageTokens];
  if (page.tokens == 0) {
    for (int g = 0; page_lse != nullptr && g < group; ++g) page_lse[g] = -INFINITY;
    return;
  }
  for (int g = 0; g < group; ++g) {
    SoftmaxState state(states + g * SoftmaxState::stride(dim), dim);
    const float bias = fold_query(layout, page.data, q + g * dim, folded);
    float page_max = -INFINITY;
    for (int t = 0; t < page.tokens; ++t) {
      const std::uint8_t* row = layout.k_row(page.data, t);
      float dot = bias;
      for (int c = 0; c < dim; ++c) dot += folded[c] * raw_value(row, c, layout.k_format, dim);
      scores[t] = dot;
      page_max = std::fmax(page_max, dot);
    }
    const float new_max = std::fmax(state.max(), page_max);
    const float rescale = state.empty() ? 0.0f : std::exp(state.max() - new_max);
    float* out = state.out();
    for (int c = 0; c < dim; ++c) out[c] *= rescale;
    float page_total = 0.0f;
    for (int t = 0; t < page.tokens; ++t) {
      const float p = std::exp(scores[t] - new_max);
      page_total += p;
      const std::uint8_t* row = layout.v_row(page.data, t);
      for (int c = 0; c < dim; ++c) {
        const float weight = p * v_scale(layout, page.data, t, c / layout.v_group);
        out[c] += weight * (raw_value(row, c, layout.v_format, dim) - v_midpoint);
      }
    }
    state.sum() = state.sum() * rescale + page_total;
    state.max() = new_max;
    if (page_lse != nullptr) page_lse[g] = new_max + std::log(page_total);
  }
}

namespace {

// One-lane traits: the blocked prefill at width 1, the same tiles as the SIMD paths.
struct V1 {
  using F = float;
  static constexpr int kWidth = 1;
  static F zero() { return 0.0f; }
  static F load(const float* p) { return *p; }
  static void store(float* p, F v) { *p = v; }
  static F set1(float x) { return x; }
  static F fmadd(F a, F b, F c) { return a * b + c; }
  static F mul(F a, F b) { return a * b; }
  static F add(F a, F b) { return a + b; }
  static F sub(F a, F b) { return a - b; }
  static F max(F a, F b) { return std::fmax(a, b); }
  static F exp(F x) { return std::exp(x); }
};

}  // namespace

void prefill_page(const PrefillPageArgs& args) { prefill_page_tiled<V1, 4, 4, 4>(args, dequantize_page_ref); }

namespace {

// bounds: f16 key_min then key_max, head_dim each.
float page_bound(const std::uint16_t* bounds, int dim, const float* q, int group) {
  const std::uint16_t* lo_bits = bounds;
  const std::uint16_t* hi_bits = bounds + dim;
  float lo[512], hi[512];
  for (int c = 0; c < dim; ++c) {
    lo[c] = f16_to_f32(lo_bits[c]);
    hi[c] = f16_to_f32(hi_bits[c]);
  }
  float best = -INFINITY;
  for (int g = 0; g < group; ++g) {
    const float* qg = q + static_cast<std::size_t>(g) * dim;
    float bound = 0.0f;
    for (int c = 0; c < dim; ++c) bound += std::fmax(qg[c] * lo[c], qg[c] * hi[c]);
    best = std::fmax(best, bound);
  }
  return best;
}

}  // namespace

void page_bounds(const std::uint16_t* bounds, std::size_t count, int head_dim, const float* q, int group, float* out) {
  const std::size_t stride = 2 * static_cast<std::size_t>(head_dim);
  for (std::size_t i = 0; i < count; ++i) out[i] = page_bound(bounds + i * stride, head_dim, q, group);
}

}  // namespace kv::scalar
