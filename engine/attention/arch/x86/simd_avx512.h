// AVX-512 (F, BW, VL, DQ) 16-lane vector traits for the decode kernel body. Included only by
// the translation unit compiled with AVX-512 flags; internal linkage, like simd_avx2.h.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/format.h"

namespace kv {
namespace {

// Sixteen payload values of channels c..c+15 as floats, before the format's scale (see
// page_layout.h for packing; fp8 uses the E4M3 -> half identity of fp16.h).
template <Format F>
inline __m512 load_raw16(const std::uint8_t* row, int c, int dim) {
  if constexpr (F == Format::F32) {
    return _mm512_loadu_ps(reinterpret_cast<const float*>(row) + c);
  } else if constexpr (F == Format::F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * c)));
  } else if constexpr (F == Format::FP8) {
    const __m256i bytes = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c)));
    const __m256i half = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(bytes, _mm256_set1_epi16(0x80)), 8),
                                         _mm256_slli_epi16(_mm256_and_si256(bytes, _mm256_set1_epi16(0x7F)), 7));
    return _mm512_cvtph_ps(half);
  } else if constexpr (F == Format::Q8) {
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + c))));
  } else if constexpr (F == Format::Q4) {
    const int base = c & ~63;
    if (base + 64 <= dim) {  // a full block: sixteen bytes, one nibble each (codes.h)
      const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + base / 2 + (c & 31))));
      const __m512i shifted = _mm512_srl_epi32(bytes, _mm_cvtsi32_si128((c & 32) != 0 ? 4 : 0));
      return _mm512_cvtepi32_ps(_mm512_and_si512(shifted, _mm512_set1_epi32(0x0F)));
    }
    // 8 bytes hold 16 channels: duplicate each byte, then shift odd lanes by 4.
    const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + c / 2));
    const __m512i lanes = _mm512_cvtepu8_epi32(_mm_unpacklo_epi8(bytes, bytes));
    const __m512i shift = _mm512_setr_epi32(0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4, 0, 4);
    return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srlv_epi32(lanes, shift), _mm512_set1_epi32(0x0F)));
  } else {
    // 4 bytes hold 16 channels: each byte to four lanes, shifted by 0, 2, 4, 6.
    std::uint32_t bits;
    std::memcpy(&bits, row + c / 4, sizeof(bits));
    const __m128i spread = _mm_shuffle_epi8(_mm_cvtsi32_si128(static_cast<int>(bits)),
                                            _mm_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3));
    const __m512i lanes = _mm512_cvtepu8_epi32(spread);
    const __m512i shift = _mm512_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6, 0, 2, 4, 6);
    return _mm512_cvtepi32_ps(_mm512_and_si512(_mm512_srlv_epi32(lanes, shift), _mm512_set1_epi32(0x03)));
  }
}

// exp_ps (simd_avx2.h) at sixteen lanes: e^x for x <= 0, clamped to [-87, 0].
inline __m512 exp_ps16(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_setzero_ps());
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i exponent = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(exponent));
}

struct V16 {
  using F = __m512;
  static constexpr int kWidth = 16;
  static F zero() { return _mm512_setzero_ps(); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static F set1(float x) { return _mm512_set1_ps(x); }
  static F broadcast(const float* p) { return _mm512_set1_ps(*p); }
  static F fmadd(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static __m256 fold(F v) { return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }
  static F load_half(const std::uint16_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F exp(F x) { return exp_ps16(x); }
  // Lanes of `negative` where the sign bit of s is set, of `other` elsewhere.
  static F select_by_sign(F s, F negative, F other) {
    return _mm512_mask_blend_ps(_mm512_movepi32_mask(_mm512_castps_si512(s)), other, negative);
  }
  template <Format Fmt>
  static F load_raw(const std::uint8_t* row, int c, int dim) { return load_raw16<Fmt>(row, c, dim); }
};

}  // namespace
}  // namespace kv
