// A page's K and V as float rows, through a vector-traits struct V (kWidth lanes, load_raw<Fmt>
// turning a row's payload into floats before its scale; fp8 through the E4M3 -> half identity,
// so its scale carries 2^8). The values are dequantize_page_ref's, up to the rounding of one
// multiply-add. Internal linkage, compiled into each ISA's translation unit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/codes.h"
#include "quant/fp16.h"
#include "quant/page_layout.h"

namespace kv {
namespace {

template <typename V, Format FK>
void dequantize_keys_simd(const PageView& page, float* k) {
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  constexpr int W = V::kWidth;
  if constexpr (FK == Format::Q8 || FK == Format::Q4 || FK == Format::Q2) {
    const float* scale = layout.at<float>(page.data, layout.k_scale);
    const float* zero = layout.at<float>(page.data, layout.k_zero);
    for (int t = 0; t < page.tokens; ++t) {
      const std::uint8_t* row = layout.k_row(page.data, t);
      float* dst = k + static_cast<std::size_t>(t) * dim;
      for (int c = 0; c < dim; c += W) {
        V::store(dst + c, V::fmadd(V::template load_raw<FK>(row, c, dim), V::load(scale + c), V::load(zero + c)));
      }
    }
  } else {
    const auto scale = V::set1(FK == Format::FP8 ? *layout.at<float>(page.data, layout.k_scale) * 256.0f : 1.0f);
    for (int t = 0; t < page.tokens; ++t) {
      const std::uint8_t* row = layout.k_row(page.data, t);
      float* dst = k + static_cast<std::size_t>(t) * dim;
      for (int c = 0; c < dim; c += W) V::store(dst + c, V::mul(V::template load_raw<FK>(row, c, dim), scale));
    }
  }
}

template <typename V, Format FV>
void dequantize_values_simd(const PageView& page, float* v) {
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  constexpr int W = V::kWidth;
  if constexpr (FV == Format::Q8 || FV == Format::Q4 || FV == Format::Q2) {
    // The caller takes lanes that divide v_group, so a vector never spans two groups.
    const auto* bits = layout.at<std::uint16_t>(page.data, layout.v_scale);
    const int groups = layout.v_groups();
    const auto midpoint = V::set1(v_code_midpoint(FV));
    for (int t = 0; t < page.tokens; ++t) {
      const std::uint8_t* row = layout.v_row(page.data, t);
      float* dst = v + static_cast<std::size_t>(t) * dim;
      for (int grp = 0; grp < groups; ++grp) {
        const auto scale = V::set1(f16_to_f32(bits[t * groups + grp]));
        for (int c = grp * layout.v_group; c < (grp + 1) * layout.v_group; c += W) {
          V::store(dst + c, V::mul(V::sub(V::template load_raw<FV>(row, c, dim), midpoint), scale));
        }
      }
    }
  } else {
    const auto scale = V::set1(FV == Format::FP8 ? *layout.at<float>(page.data, layout.v_scale) * 256.0f : 1.0f);
    for (int t = 0; t < page.tokens; ++t) {
      const std::uint8_t* row = layout.v_row(page.data, t);
      float* dst = v + static_cast<std::size_t>(t) * dim;
      for (int c = 0; c < dim; c += W) V::store(dst + c, V::mul(V::template load_raw<FV>(row, c, dim), scale));
    }
  }
}

template <typename V, template <typename, Format> class Fn, typename... Args>
void with_format(Format format, Args&&... args) {
  switch (format) {
    case Format::F32: return Fn<V, Format::F32>::run(args...);
    case Format::F16: return Fn<V, Format::F16>::run(args...);
    case Format::FP8: return Fn<V, Format::FP8>::run(args...);
    case Format::Q8: return Fn<V, Format::Q8>::run(args...);
    case Format::Q4: return Fn<V, Format::Q4>::run(args...);
    case Format::Q2: return Fn<V, Format::Q2>::run(args...);
  }
}

template <typename V, Format F>
struct DequantizeKeys {
  static void run(const PageView& page, float* k) { dequantize_keys_simd<V, F>(page, k); }
};
template <typename V, Format F>
struct DequantizeValues {
  static void run(const PageView& page, float* v) { dequantize_values_simd<V, F>(page, v); }
};

// dequantize_page_ref's contract: rows [token][head_dim] of K and of V.
template <typename V>
void dequantize_page_simd(const PageView& page, float* k, float* v) {
  with_format<V, DequantizeKeys>(page.layout->k_format, page, k);
  with_format<V, DequantizeValues>(page.layout->v_format, page, v);
}

}  // namespace
}  // namespace kv
