// AVX2 building blocks for the decode kernels: the 8-lane vector traits (V8) and the
// horizontal helpers. Included only by translation units compiled with AVX2+FMA+F16C flags;
// everything has internal linkage so no copy can leak into a path the CPU lacks.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "quant/format.h"

namespace kv {
namespace {

// e^x for x <= 0 (Cephes single-precision polynomial, about 2 ulp); inputs are clamped to
// [-87, 0] so the result is never Inf or NaN.
inline __m256 exp_ps(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_setzero_ps());
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i exponent = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
}

// e^x for x <= 0 where a few 1e-6 of relative error are enough (page-relative softmax weights
// of the integer V pass, which are rounded to 7 bits): one range reduction and a degree-5
// Taylor polynomial of 2^f on [-1/2, 1/2]; inputs are clamped at -87. Against std::exp on 2M
// points of [-30, 0]: at most 4.2e-6 relative (exp_ps: 1.2e-7).
inline __m256 exp_ps_fast(__m256 x) {
  const __m256 t = _mm256_mul_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(1.44269504088896341f));
  const __m256 n = _mm256_round_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(t, n);
  __m256 p = _mm256_set1_ps(1.3333558146e-3f);  // ln2^5 / 120
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.6181291076e-3f));  // ln2^4 / 24
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.5504108665e-2f));  // ln2^3 / 6
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.4022650696e-1f));  // ln2^2 / 2
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.9314718056e-1f));  // ln2
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
  const __m256i exponent = _mm256_slli_epi32(_mm256_cvtps_epi32(n), 23);
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), exponent));
}

inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline __m256 hmax8(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm256_set1_ps(_mm_cvtss_f32(s));
}

// Sums of four accumulators at once: lane g of the result is the horizontal sum of acc[g].
inline __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// Maxima of four accumulators at once: lane g of the result is the largest lane of a_g.
inline __m128 hmax4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 t0 = _mm256_max_ps(_mm256_unpacklo_ps(a0, a1), _mm256_unpackhi_ps(a0, a1));
  const __m256 t1 = _mm256_max_ps(_mm256_unpacklo_ps(a2, a3), _mm256_unpackhi_ps(a2, a3));
  const __m256 t = _mm256_max_ps(_mm256_shuffle_ps(t0, t1, 0x44), _mm256_shuffle_ps(t0, t1, 0xEE));
  return _mm_max_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

// Per-head reduction of a vector of scores laid out [token][head] (NG heads, 8 / NG tokens
// per vector): lane g of the result holds the reduction for head g.
template <int NG, typename Op>
inline __m128 reduce_heads(__m256 v, Op op) {
  __m128 x = op(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  if constexpr (NG <= 2) x = op(x, _mm_movehl_ps(x, x));
  if constexpr (NG == 1) x = op(x, _mm_movehdup_ps(x));
  return x;
}

// Broadcasts per-head values (lanes 0..NG-1) back to the [token][head] pattern.
template <int NG>
inline __m256 spread_heads(__m128 x) {
  if constexpr (NG == 2) x = _mm_movelh_ps(x, x);
  if constexpr (NG == 1) x = _mm_broadcastss_ps(x);
  return _mm256_set_m128(x, x);
}

// Eight payload values of channels c..c+7 of a row of `dim` channels as floats, before the format's scale (see
// page_layout.h for packing; fp8 uses the E4M3 -> half identity of fp16.h, scale 2^8 folded).
template <Format F>
inline __m256 load_raw8(const std::uint8_t* row, int c, int dim) {
  if constexpr (F == Format::F32) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
  } else if constexpr (F == Format::F16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c)));
  } else if constexpr (F == Format::FP8) {
    const __m128i bytes = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + c)));
    const __m128i half = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(bytes, _mm_set1_epi16(0x80)), 8),
                                      _mm_slli_epi16(_mm_and_si128(bytes, _mm_set1_epi16(0x7F)), 7));
    return _mm256_cvtph_ps(half);
  } else if constexpr (F == Format::Q8) {
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + c))));
  } else if constexpr (F == Format::Q4) {
    const int base = c & ~63;
    if (base + 64 <= dim) {  // a full block: eight bytes, one nibble each (codes.h)
      const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + base / 2 + (c & 31))));
      const __m256i shifted = _mm256_srl_epi32(bytes, _mm_cvtsi32_si128((c & 32) != 0 ? 4 : 0));
      return _mm256_cvtepi32_ps(_mm256_and_si256(shifted, _mm256_set1_epi32(0x0F)));
    }
    std::uint32_t bits;
    std::memcpy(&bits, row + c / 2, sizeof(bits));
    const __m256i shifted = _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(bits)),
                                              _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    return _mm256_cvtepi32_ps(_mm256_and_si256(shifted, _mm256_set1_epi32(0x0F)));
  } else {
    std::uint16_t bits;
    std::memcpy(&bits, row + c / 4, sizeof(bits));
    const __m256i shifted = _mm256_srlv_epi32(_mm256_set1_epi32(bits), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14));
    return _mm256_cvtepi32_ps(_mm256_and_si256(shifted, _mm256_set1_epi32(0x03)));
  }
}

// 8-lane traits: the decode kernel body (decode_simd_impl.h) is written against these.
struct V8 {
  using F = __m256;
  static constexpr int kWidth = 8;
  static F zero() { return _mm256_setzero_ps(); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static F set1(float x) { return _mm256_set1_ps(x); }
  static F broadcast(const float* p) { return _mm256_broadcast_ss(p); }
  static F fmadd(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static __m256 fold(F v) { return v; }  // to eight lanes for the horizontal helpers
  static F load_half(const std::uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F exp(F x) { return exp_ps(x); }
  // Lanes of `negative` where the sign bit of s is set, of `other` elsewhere.
  static F select_by_sign(F s, F negative, F other) { return _mm256_blendv_ps(other, negative, s); }
  template <Format Fmt>
  static F load_raw(const std::uint8_t* row, int c, int dim) { return load_raw8<Fmt>(row, c, dim); }
};

}  // namespace
}  // namespace kv
