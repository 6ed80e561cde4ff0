// AVX2+FMA+F16C kernels. Compiled with those flags and only called after a CPUID check.
//
// The decode kernel is fused: K and V codes are turned into floats in registers, 8 channels
// at a time, and never written back. Format scales are folded out of the inner loops: K's
// per-channel scale goes into the query (q' = q * scale, plus a bias q . zero), V's per-token
// group scale goes into the softmax weight. Heads of a GQA group are processed up to four at
// a time so that each K/V vector is unpacked once for all of them. The kernel is long because
// each stage is written out per format through templates; the structure is: fold query ->
// scores -> online-softmax update -> weighted V sum.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "attention/page_kernels.h"
#include "attention/prefill_page_impl.h"
#include "attention/softmax_state.h"
#include "quant/codes.h"

namespace kv::avx2 {

namespace {

constexpr int kMaxChunkHeads = 4;

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

// Eight payload values of channels c..c+7 as floats, before the format's scale (see
// page_layout.h for packing; fp8 uses the E4M3 -> half identity of fp16.h, scale 2^8 folded).
template <Format F>
inline __m256 load_raw8(const std::uint8_t* row, int c) {
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

// Multiplier that turns a raw payload value into the stored value, for page-wide scales.
template <Format F>
float page_raw_scale(const PageLayout& layout, const std::byte* page, std::size_t scale_offset) {
  if constexpr (F == Format::FP8) return *layout.at<float>(page, scale_offset) * 256.0f;
  return 1.0f;
}

// Per-thread scratch: folded queries, scores and V weights of one head chunk.
struct Scratch {
  std::vector<float> folded;   // [heads][dim]
  std::vector<float> scores;   // [heads][page_tokens rounded to 8]
  std::vector<float> weights;  // [page_tokens][v_groups][heads]
};
Scratch& scratch() {
  static thread_local Scratch s;
  return s;
}

// Sums of four accumulators at once: lane g of the result is the horizontal sum of acc[g].
inline __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

template <Format FK, int NG>
void fold_query(const PageView& page, const float* q, float* folded, float* bias) {
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  if constexpr (FK == Format::Q8 || FK == Format::Q4 || FK == Format::Q2) {
    const float* scale = layout.at<float>(page.data, layout.k_scale);
    const float* zero = layout.at<float>(page.data, layout.k_zero);
    for (int g = 0; g < NG; ++g) {
      __m256 b = _mm256_setzero_ps();
      for (int c = 0; c < dim; c += 8) {
        const __m256 qv = _mm256_loadu_ps(q + g * dim + c);
        _mm256_storeu_ps(folded + g * dim + c, _mm256_mul_ps(qv, _mm256_loadu_ps(scale + c)));
        b = _mm256_fmadd_ps(qv, _mm256_loadu_ps(zero + c), b);
      }
      bias[g] = hsum(b);
    }
  } else {
    const __m256 scale = _mm256_set1_ps(page_raw_scale<FK>(layout, page.data, layout.k_scale));
    for (int g = 0; g < NG; ++g) {
      for (int c = 0; c < dim; c += 8) {
        _mm256_storeu_ps(folded + g * dim + c, _mm256_mul_ps(_mm256_loadu_ps(q + g * dim + c), scale));
      }
      bias[g] = 0.0f;
    }
  }
}

// scores[g][t] = q'[g] . raw(k[t]) + bias[g]. Accumulators are named, not an array, so the
// compiler keeps them in registers.
template <Format FK, int NG>
void score_tokens(const PageView& page, const float* q, Scratch& s) {
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  float* folded = s.folded.data();
  float bias[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  fold_query<FK, NG>(page, q, folded, bias);
  const float* f0 = folded;
  const float* f1 = folded + (NG > 1 ? 1 : 0) * dim;
  const float* f2 = folded + (NG > 2 ? 2 : 0) * dim;
  const float* f3 = folded + (NG > 3 ? 3 : 0) * dim;
  const std::uint8_t* row = layout.at<std::uint8_t>(page.data, layout.k_data);
  const std::size_t row_bytes = layout.k_row_bytes();
  float* scores = s.scores.data();
  // Two tokens per iteration: eight independent FMA chains hide the FMA latency, and each
  // folded-query load serves both tokens.
  int t = 0;
  for (; t + 2 <= page.tokens; t += 2, row += 2 * row_bytes) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int c = 0; c < dim; c += 8) {
      const __m256 k8 = load_raw8<FK>(row, c);
      const __m256 n8 = load_raw8<FK>(row + row_bytes, c);
      const __m256 q0 = _mm256_loadu_ps(f0 + c);
      a0 = _mm256_fmadd_ps(q0, k8, a0);
      b0 = _mm256_fmadd_ps(q0, n8, b0);
      if constexpr (NG > 1) {
        const __m256 q1 = _mm256_loadu_ps(f1 + c);
        a1 = _mm256_fmadd_ps(q1, k8, a1);
        b1 = _mm256_fmadd_ps(q1, n8, b1);
      }
      if constexpr (NG > 2) {
        const __m256 q2 = _mm256_loadu_ps(f2 + c);
        a2 = _mm256_fmadd_ps(q2, k8, a2);
        b2 = _mm256_fmadd_ps(q2, n8, b2);
      }
      if constexpr (NG > 3) {
        const __m256 q3 = _mm256_loadu_ps(f3 + c);
        a3 = _mm256_fmadd_ps(q3, k8, a3);
        b3 = _mm256_fmadd_ps(q3, n8, b3);
      }
    }
    alignas(16) float sums[8];
    _mm_store_ps(sums, hsum4(a0, a1, a2, a3));
    _mm_store_ps(sums + 4, hsum4(b0, b1, b2, b3));
    for (int g = 0; g < NG; ++g) {
      scores[t * NG + g] = sums[g] + bias[g];
      scores[(t + 1) * NG + g] = sums[4 + g] + bias[g];
    }
  }
  if (t < page.tokens) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    for (int c = 0; c < dim; c += 8) {
      const __m256 k8 = load_raw8<FK>(row, c);
      a0 = _mm256_fmadd_ps(_mm256_loadu_ps(f0 + c), k8, a0);
      if constexpr (NG > 1) a1 = _mm256_fmadd_ps(_mm256_loadu_ps(f1 + c), k8, a1);
      if constexpr (NG > 2) a2 = _mm256_fmadd_ps(_mm256_loadu_ps(f2 + c), k8, a2);
      if constexpr (NG > 3) a3 = _mm256_fmadd_ps(_mm256_loadu_ps(f3 + c), k8, a3);
    }
    alignas(16) float sums[4];
    _mm_store_ps(sums, hsum4(a0, a1, a2, a3));
    for (int g = 0; g < NG; ++g) scores[t * NG + g] = sums[g] + bias[g];
  }
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

// Scores ([token][head]) become softmax weights against the new running max. Writes the
// per-head rescale factor of the old state and updates each state's max and sum.
template <int NG>
void softmax_update(const PageView& page, float* states, int dim, float* rescale, Scratch& s) {
  const int count = page.tokens * NG;
  const int padded = (count + 7) & ~7;
  float* scores = s.scores.data();
  for (int i = count; i < padded; ++i) scores[i] = -INFINITY;
  __m256 vmax = _mm256_set1_ps(-INFINITY);
  for (int i = 0; i < padded; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(scores + i));
  alignas(16) float page_max[4];
  _mm_store_ps(page_max, reduce_heads<NG>(vmax, [](__m128 a, __m128 b) { return _mm_max_ps(a, b); }));
  alignas(16) float new_max[4] = {};
  for (int g = 0; g < NG; ++g) {
    SoftmaxState state(states + g * SoftmaxState::stride(dim), dim);
    new_max[g] = std::fmax(state.max(), page_max[g]);
    rescale[g] = state.empty() ? 0.0f : std::exp(state.max() - new_max[g]);
  }
  const __m256 m = spread_heads<NG>(_mm_load_ps(new_max));
  __m256 total = _mm256_setzero_ps();
  for (int i = 0; i < padded; i += 8) {
    __m256 p = exp_ps(_mm256_sub_ps(_mm256_loadu_ps(scores + i), m));
    if (i + 8 > count) {  // zero the padding lanes of a partial page
      const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      const __m256i valid = _mm256_cmpgt_epi32(_mm256_set1_epi32(count - i), lane);
      p = _mm256_and_ps(p, _mm256_castsi256_ps(valid));
    }
    _mm256_storeu_ps(scores + i, p);
    total = _mm256_add_ps(total, p);
  }
  alignas(16) float sums[4];
  _mm_store_ps(sums, reduce_heads<NG>(total, [](__m128 a, __m128 b) { return _mm_add_ps(a, b); }));
  for (int g = 0; g < NG; ++g) {
    SoftmaxState state(states + g * SoftmaxState::stride(dim), dim);
    state.sum() = state.sum() * rescale[g] + sums[g];
    state.max() = new_max[g];
  }
}

// out[g] = rescale[g] * out[g] + sum_t w[t][g] * v[t], 8 channels at a time with the
// accumulators in registers. Weights are laid out [t][group][head] so a token's NG weights are
// adjacent; the V midpoint of integer formats is subtracted once per block through the
// weight sums instead of once per value.
template <Format FV, int NG>
void accumulate_values(const PageView& page, float* states, const float* rescale, Scratch& s) {
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  constexpr bool kInteger = FV == Format::Q8 || FV == Format::Q4 || FV == Format::Q2;
  const int groups = kInteger ? layout.v_groups() : 1;
  float* weights = s.weights.data();
  const float* p = s.scores.data();  // softmax weights, [token][head]
  float weight_sums[16 * 4] = {};    // [group][head]; groups <= 512 / 32
  if constexpr (kInteger) {
    const auto* scale_bits = layout.at<std::uint16_t>(page.data, layout.v_scale);
    for (int grp = 0; grp < groups; ++grp) {
      float sum[4] = {};
      for (int t = 0; t < page.tokens; ++t) {
        const float scale = _cvtsh_ss(scale_bits[t * groups + grp]);
        float* w = weights + (t * groups + grp) * NG;
        for (int g = 0; g < NG; ++g) {
          w[g] = p[t * NG + g] * scale;
          sum[g] += w[g];
        }
      }
      for (int g = 0; g < NG; ++g) weight_sums[grp * NG + g] = sum[g];
    }
  } else {
    const __m256 page_scale = _mm256_set1_ps(page_raw_scale<FV>(layout, page.data, layout.v_scale));
    for (int i = 0; i < page.tokens * NG; i += 8) {
      _mm256_storeu_ps(weights + i, _mm256_mul_ps(_mm256_loadu_ps(p + i), page_scale));
    }
  }
  const std::uint8_t* rows = layout.at<std::uint8_t>(page.data, layout.v_data);
  const std::size_t row_bytes = layout.v_row_bytes();
  const std::size_t stride = SoftmaxState::stride(dim);
  const std::size_t token_step = static_cast<std::size_t>(groups) * NG;
  const float midpoint = kInteger ? v_code_midpoint(FV) : 0.0f;
  auto finish = [&](float* out, __m256 acc, int g, int grp) {
    const __m256 shift = _mm256_set1_ps(midpoint * weight_sums[grp * NG + g]);
    const __m256 old = _mm256_mul_ps(_mm256_loadu_ps(out), _mm256_set1_ps(rescale[g]));
    _mm256_storeu_ps(out, _mm256_add_ps(old, _mm256_sub_ps(acc, shift)));
  };
  // 16 channels per pass where head_dim allows (eight independent FMA chains), else 8.
  const int block = dim % 16 == 0 ? 16 : 8;
  for (int c = 0; c < dim; c += block) {
    const int grp = kInteger ? c / layout.v_group : 0;  // v_group >= 16 when block is 16
    float* o0 = states + 2 + c;
    const float* w = weights + grp * NG;
    const std::uint8_t* row = rows;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    __m256 b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    if (block == 16) {
      for (int t = 0; t < page.tokens; ++t, row += row_bytes, w += token_step) {
        const __m256 v8 = load_raw8<FV>(row, c);
        const __m256 u8 = load_raw8<FV>(row, c + 8);
        const __m256 w0 = _mm256_broadcast_ss(w);
        a0 = _mm256_fmadd_ps(w0, v8, a0);
        b0 = _mm256_fmadd_ps(w0, u8, b0);
        if constexpr (NG > 1) {
          const __m256 w1 = _mm256_broadcast_ss(w + 1);
          a1 = _mm256_fmadd_ps(w1, v8, a1);
          b1 = _mm256_fmadd_ps(w1, u8, b1);
        }
        if constexpr (NG > 2) {
          const __m256 w2 = _mm256_broadcast_ss(w + 2);
          a2 = _mm256_fmadd_ps(w2, v8, a2);
          b2 = _mm256_fmadd_ps(w2, u8, b2);
        }
        if constexpr (NG > 3) {
          const __m256 w3 = _mm256_broadcast_ss(w + 3);
          a3 = _mm256_fmadd_ps(w3, v8, a3);
          b3 = _mm256_fmadd_ps(w3, u8, b3);
        }
      }
    } else {
      for (int t = 0; t < page.tokens; ++t, row += row_bytes, w += token_step) {
        const __m256 v8 = load_raw8<FV>(row, c);
        a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(w), v8, a0);
        if constexpr (NG > 1) a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + 1), v8, a1);
        if constexpr (NG > 2) a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + 2), v8, a2);
        if constexpr (NG > 3) a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(w + 3), v8, a3);
      }
    }
    const __m256 acc_a[4] = {a0, a1, a2, a3};
    const __m256 acc_b[4] = {b0, b1, b2, b3};
    for (int g = 0; g < NG; ++g) {
      finish(o0 + g * stride, acc_a[g], g, grp);
      if (block == 16) finish(o0 + g * stride + 8, acc_b[g], g, grp);
    }
  }
}

template <Format FK, Format FV, int NG>
void decode_chunk(const PageView& page, const float* q, float* states) {
  Scratch& s = scratch();
  const PageLayout& layout = *page.layout;
  const auto dim = static_cast<std::size_t>(layout.head_dim);
  const auto tokens = static_cast<std::size_t>(layout.page_tokens);
  const auto groups = static_cast<std::size_t>(layout.v_groups());
  s.folded.resize(NG * dim);
  s.scores.resize(NG * tokens + 8);
  s.weights.resize(NG * tokens * groups + 8);
  float rescale[NG];
  score_tokens<FK, NG>(page, q, s);
  softmax_update<NG>(page, states, layout.head_dim, rescale, s);
  accumulate_values<FV, NG>(page, states, rescale, s);
}

using ChunkFn = void (*)(const PageView&, const float*, float*);

template <Format FK, int NG>
ChunkFn pick_v(Format v) {
  switch (v) {
    case Format::F32: return &decode_chunk<FK, Format::F32, NG>;
    case Format::F16: return &decode_chunk<FK, Format::F16, NG>;
    case Format::FP8: return &decode_chunk<FK, Format::FP8, NG>;
    case Format::Q8: return &decode_chunk<FK, Format::Q8, NG>;
    case Format::Q4: return &decode_chunk<FK, Format::Q4, NG>;
    case Format::Q2: return &decode_chunk<FK, Format::Q2, NG>;
  }
  return nullptr;
}

template <int NG>
ChunkFn pick(Format k, Format v) {
  switch (k) {
    case Format::F32: return pick_v<Format::F32, NG>(v);
    case Format::F16: return pick_v<Format::F16, NG>(v);
    case Format::FP8: return pick_v<Format::FP8, NG>(v);
    case Format::Q8: return pick_v<Format::Q8, NG>(v);
    case Format::Q4: return pick_v<Format::Q4, NG>(v);
    case Format::Q2: return pick_v<Format::Q2, NG>(v);
  }
  return nullptr;
}

}  // namespace

void decode_page(const PageView& page, const float* q, int group, float* states) {
  if (page.tokens == 0) return;
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  int g = 0;
  while (g < group) {
    const int left = group - g;
    const int heads = left >= kMaxChunkHeads ? kMaxChunkHeads : (left >= 2 ? 2 : 1);
    ChunkFn fn = heads == 4 ? pick<4>(layout.k_format, layout.v_format)
                            : heads == 2 ? pick<2>(layout.k_format, layout.v_format)
                                         : pick<1>(layout.k_format, layout.v_format);
    fn(page, q + static_cast<std::size_t>(g) * dim, states + g * SoftmaxState::stride(dim));
    g += heads;
  }
}

void prefill_page(const PrefillPageArgs& args) { prefill_page_impl(args); }

}  // namespace kv::avx2
