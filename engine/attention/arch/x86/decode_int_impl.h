// Integer q4 paths of the fused decode kernel (rules and error in int_dot.h), written with AVX2
// integer instructions and compiled into the AVX2 and AVX-512 units. Internal linkage, like
// decode_simd_impl.h, which includes this file and owns the scratch.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "attention/int_dot.h"
#include "attention/page_prefetch.h"
#include "attention/arch/x86/simd_avx2.h"
#include "quant/codes.h"
#include "quant/page_layout.h"

namespace kv {
namespace {

// The V passes request a share of the next page once per this many tokens of each block of
// channels (decode_simd_impl.h spreads the requests over the K and V passes).
constexpr int kPrefetchTokensV = 8;

// PagePrefetch steps of a V pass over blocks of `block` channels: one per kPrefetchTokensV
// tokens of each block.
inline std::size_t value_prefetch_steps(const PageView& page, int block) {
  return static_cast<std::size_t>(page.layout->head_dim / block) *
         static_cast<std::size_t>((page.tokens + kPrefetchTokensV - 1) / kPrefetchTokensV);
}

// Scratch of the integer paths, per thread.
struct IntScratch {
  alignas(32) std::int8_t query[4][256];  // int8 folded queries
  alignas(32) float p[4][kMaxPageTokens + 32];   // softmax numerators, head-major
  alignas(32) float vs[kMaxIntVGroups][kMaxPageTokens + 32];  // V group scales, group-major
  // 7-bit weights of each V group: [head][token] for chunks of one or two heads, and
  // [token pair][head][token of the pair] for four (quantize_weights_pairs).
  alignas(32) std::int8_t w[kMaxIntVGroups][4][kMaxPageTokens + 32];
  float w_scale[kMaxIntVGroups][4];
  float w_shift[kMaxIntVGroups][4];  // midpoint * sum_t w8, per (group, head)

  // A V group's weights as one run of bytes: the four-head layout runs across the head rows.
  std::int8_t* group_weights(int grp) { return reinterpret_cast<std::int8_t*>(&w[grp]); }
  const std::int8_t* group_weights(int grp) const { return reinterpret_cast<const std::int8_t*>(&w[grp]); }
};
IntScratch& int_scratch() {
  // local-exec (decode_simd_impl.h's scratch() says why).
  static thread_local IntScratch s __attribute__((tls_model("local-exec")));
  return s;
}

// Lane i of the result is the sum of the eight lanes of v[i]. Unpacks and adds, one uop each,
// rather than vphaddd (several uops each).
__attribute__((always_inline)) inline __m256i hsum8_epi32(const __m256i* v) {
  // Pairs: lanes [a0+a2, b0+b2, a1+a3, b1+b3 | the same for lanes 4..7].
  const auto pair = [](__m256i a, __m256i b) { return _mm256_add_epi32(_mm256_unpacklo_epi32(a, b), _mm256_unpackhi_epi32(a, b)); };
  const __m256i a01 = pair(v[0], v[1]), a23 = pair(v[2], v[3]), a45 = pair(v[4], v[5]), a67 = pair(v[6], v[7]);
  // Quads: lane i (i < 4) the sum of v[i]'s lanes 0..3, lane 4 + i of its lanes 4..7.
  const __m256i b0 = _mm256_add_epi32(_mm256_unpacklo_epi64(a01, a23), _mm256_unpackhi_epi64(a01, a23));
  const __m256i b1 = _mm256_add_epi32(_mm256_unpacklo_epi64(a45, a67), _mm256_unpackhi_epi64(a45, a67));
  return _mm256_add_epi32(_mm256_permute2x128_si256(b0, b1, 0x20), _mm256_permute2x128_si256(b0, b1, 0x31));
}

inline float hmax1(__m256 v) { return _mm256_cvtss_f32(hmax8(v)); }

// 32 int32 values (four vectors, in order) to 32 int8 values in order (they fit).
inline __m256i pack32_epi8(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// One token row against the int8 queries of NG heads: acc[g] = the row's dot products as eight
// int32 partial sums. BLOCKS: 64-channel blocks per row.
template <int NG, int BLOCKS>
__attribute__((always_inline)) inline void dot_row(const std::uint8_t* row, const IntScratch& s, __m256i* acc) {
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  __m256i lo[BLOCKS], hi[BLOCKS];
  for (int b = 0; b < BLOCKS; ++b) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * b));
    lo[b] = _mm256_and_si256(x, nibble);                         // channels 64b + 0..31
    hi[b] = _mm256_and_si256(_mm256_srli_epi16(x, 4), nibble);  // channels 64b + 32..63
  }
  for (int g = 0; g < NG; ++g) {
    const auto* q = reinterpret_cast<const __m256i*>(s.query[g]);
    __m256i sum = _mm256_add_epi16(_mm256_maddubs_epi16(lo[0], _mm256_load_si256(q)),
                                   _mm256_maddubs_epi16(hi[0], _mm256_load_si256(q + 1)));
    for (int b = 1; b < BLOCKS; ++b) {
      sum = _mm256_add_epi16(sum, _mm256_add_epi16(_mm256_maddubs_epi16(lo[b], _mm256_load_si256(q + 2 * b)),
                                                   _mm256_maddubs_epi16(hi[b], _mm256_load_si256(q + 2 * b + 1))));
    }
    acc[g] = _mm256_madd_epi16(sum, _mm256_set1_epi16(1));
  }
}

// Scores of a page's rows, 8 / NG tokens per vector of eight [token][head] results.
template <int NG, int BLOCKS>
void score_rows(const std::uint8_t* rows, std::size_t row_bytes, int tokens, const IntScratch& s, __m256 vscale,
                __m256 vbias, float* scores, PagePrefetch& prefetch) {
  constexpr int kTokens = 8 / NG;
  int t = 0;
  for (; t + kTokens <= tokens; t += kTokens) {
    prefetch.step();
    __m256i sums[8];
    for (int i = 0; i < kTokens; ++i) {
      // The queries stay in memory as operands of vpmaddubsw: kept in registers for both rows,
      // they would not fit beside the accumulators and would spill. The empty asm, once per
      // row, hides that they do not change.
      const IntScratch* queries = &s;
      __asm__("" : "+r"(queries));
      dot_row<NG, BLOCKS>(rows + static_cast<std::size_t>(t + i) * row_bytes, *queries, sums + i * NG);
    }
    const __m256 dots = _mm256_cvtepi32_ps(hsum8_epi32(sums));
    _mm256_storeu_ps(scores + t * NG, _mm256_fmadd_ps(dots, vscale, vbias));
  }
  if (t < tokens) {
    __m256i sums[8];
    for (int i = 0; i < kTokens; ++i) {
      if (t + i < tokens) {
        dot_row<NG, BLOCKS>(rows + static_cast<std::size_t>(t + i) * row_bytes, s, sums + i * NG);
      } else {
        for (int g = 0; g < NG; ++g) sums[i * NG + g] = _mm256_setzero_si256();
      }
    }
    const __m256 dots = _mm256_cvtepi32_ps(hsum8_epi32(sums));
    _mm256_storeu_ps(scores + t * NG, _mm256_fmadd_ps(dots, vscale, vbias));
  }
}

// out[c] = round(folded[c] * inv) as int8, dim a multiple of 32.
inline void round_query(const float* folded, float inv, int dim, std::int8_t* out) {
  const __m256 iv = _mm256_set1_ps(inv);
  for (int c = 0; c < dim; c += 32) {
    const __m256i a = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(folded + c), iv));
    const __m256i b = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(folded + c + 8), iv));
    const __m256i cc = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(folded + c + 16), iv));
    const __m256i d = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(folded + c + 24), iv));
    _mm256_store_si256(reinterpret_cast<__m256i*>(out + c), pack32_epi8(a, b, cc, d));
  }
}

// scores[t][g] = q'[g] . code[t] + q[g] . zero with an int8 query (int_dot.h).
template <int NG>
void score_tokens_int(const PageView& page, const float* q, float* scores, PagePrefetch& prefetch) {
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  const float* k_scale = layout.at<float>(page.data, layout.k_scale);
  const float* k_zero = layout.at<float>(page.data, layout.k_zero);
  IntScratch& s = int_scratch();
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  // The group's heads together: each K scale and zero vector is loaded once, the heads' chains
  // interleave, and one vector max, division and sum serve all of them (cheaper than one head
  // after the other). Lanes of heads past NG stay 0 and are not used.
  alignas(32) float folded[4][256];
  __m256 b0 = _mm256_setzero_ps(), b1 = b0, b2 = b0, b3 = b0, m0 = b0, m1 = b0, m2 = b0, m3 = b0;
  for (int c = 0; c < dim; c += 8) {
    const __m256 ks = _mm256_loadu_ps(k_scale + c), kz = _mm256_loadu_ps(k_zero + c);
    const auto head = [&](int g, __m256& b, __m256& m) __attribute__((always_inline)) {
      const __m256 qv = _mm256_loadu_ps(q + g * dim + c);
      const __m256 f = _mm256_mul_ps(qv, ks);
      _mm256_store_ps(folded[g] + c, f);
      b = _mm256_fmadd_ps(qv, kz, b);
      m = _mm256_max_ps(m, _mm256_and_ps(f, abs_mask));
    };
    head(0, b0, m0);
    if constexpr (NG > 1) head(1, b1, m1);
    if constexpr (NG > 2) head(2, b2, m2);
    if constexpr (NG > 3) head(3, b3, m3);
  }
  const __m128 mx = hmax4(m0, m1, m2, m3);  // lane g: head g
  alignas(16) float inv[4];
  _mm_store_ps(inv, _mm_and_ps(_mm_div_ps(_mm_set1_ps(kQueryCodeMax), mx), _mm_cmpgt_ps(mx, _mm_setzero_ps())));
  for (int g = 0; g < NG; ++g) round_query(folded[g], inv[g], dim, s.query[g]);
  // Per lane of a score vector ([token][head], 8 / NG tokens): its head's scale and bias.
  const __m256 vscale = spread_heads<NG>(_mm_div_ps(mx, _mm_set1_ps(kQueryCodeMax)));
  const __m256 vbias = spread_heads<NG>(hsum4(b0, b1, b2, b3));
  const std::uint8_t* rows = layout.at<std::uint8_t>(page.data, layout.k_data);
  const std::size_t row_bytes = layout.k_row_bytes();
  switch (dim / 64) {
    case 1: score_rows<NG, 1>(rows, row_bytes, page.tokens, s, vscale, vbias, scores, prefetch); break;
    case 2: score_rows<NG, 2>(rows, row_bytes, page.tokens, s, vscale, vbias, scores, prefetch); break;
    case 3: score_rows<NG, 3>(rows, row_bytes, page.tokens, s, vscale, vbias, scores, prefetch); break;
    default: score_rows<NG, 4>(rows, row_bytes, page.tokens, s, vscale, vbias, scores, prefetch); break;
  }
}

// Transposes eight rows of four floats (two rows per vector: [r0 | r1], [r2 | r3], ...) into
// four columns of eight, in row order.
inline void transpose8x4(__m256 r0, __m256 r1, __m256 r2, __m256 r3, float* c0, float* c1, float* c2, float* c3) {
  const __m256 u0 = _mm256_unpacklo_ps(r0, r1), u1 = _mm256_unpackhi_ps(r0, r1);
  const __m256 u2 = _mm256_unpacklo_ps(r2, r3), u3 = _mm256_unpackhi_ps(r2, r3);
  // Columns come out as rows [0 2 4 6 | 1 3 5 7]; one permute restores row order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_ps(c0, _mm256_permutevar8x32_ps(_mm256_shuffle_ps(u0, u2, 0x44), order));
  _mm256_storeu_ps(c1, _mm256_permutevar8x32_ps(_mm256_shuffle_ps(u0, u2, 0xEE), order));
  _mm256_storeu_ps(c2, _mm256_permutevar8x32_ps(_mm256_shuffle_ps(u1, u3, 0x44), order));
  _mm256_storeu_ps(c3, _mm256_permutevar8x32_ps(_mm256_shuffle_ps(u1, u3, 0xEE), order));
}

// Quantizes the page's weights for a chunk of one or two heads (four: quantize_weights_pairs):
// p ([token][head], softmax numerators, zero past the page's tokens up to a multiple of 32) and
// the V group scales into s.w, s.w_scale and s.w_shift.
// p is page-relative (softmax_update<NG, true>): its largest value is exp(0) = 1, p_sum is its
// sum per head as the softmax found it (no second pass over p for the sum and maximum, nor one
// to scale p in place), and page_scale carries it to the running max.
template <int NG>
void quantize_weights(const PageView& page, const float* p, const float* p_sum, const float* page_scale, IntScratch& s) {
  const PageLayout& layout = *page.layout;
  const int groups = layout.v_groups();
  const int tokens = page.tokens;
  const int padded = (tokens + 31) & ~31;
  // Head factors c from the softmax's sums (the largest weight is 1); head-major numerators
  // times 1 / c.
  float head_scale[4], head_inverse[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int g = 0; g < NG; ++g) {
    head_scale[g] = weight_head_scale(p_sum[g], 1.0f, tokens);
    head_inverse[g] = weight_inverse(head_scale[g]);
  }
  if constexpr (NG == 4) {
    const __m256 inv = _mm256_setr_ps(head_inverse[0], head_inverse[1], head_inverse[2], head_inverse[3],
                                      head_inverse[0], head_inverse[1], head_inverse[2], head_inverse[3]);
    for (int t = 0; t < padded; t += 8) {
      const float* rows = p + t * 4;
      transpose8x4(_mm256_mul_ps(_mm256_loadu_ps(rows), inv), _mm256_mul_ps(_mm256_loadu_ps(rows + 8), inv),
                   _mm256_mul_ps(_mm256_loadu_ps(rows + 16), inv), _mm256_mul_ps(_mm256_loadu_ps(rows + 24), inv),
                   s.p[0] + t, s.p[1] + t, s.p[2] + t, s.p[3] + t);
    }
  } else {
    for (int t = 0; t < padded; ++t) {
      for (int g = 0; g < NG; ++g) s.p[g][t] = p[t * NG + g] * head_inverse[g];
    }
  }
  // Group-major V scales, zero past the page's tokens.
  const auto* bits = layout.at<std::uint16_t>(page.data, layout.v_scale);
  int t = 0;
  if (groups == 4) {
    for (; t + 8 <= tokens; t += 8) {
      const auto row_pair = [&](int i) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + (t + 2 * i) * 4))); };
      transpose8x4(row_pair(0), row_pair(1), row_pair(2), row_pair(3), s.vs[0] + t, s.vs[1] + t, s.vs[2] + t, s.vs[3] + t);
    }
  }
  for (; t < padded; ++t) {
    for (int grp = 0; grp < groups; ++grp) s.vs[grp][t] = t < tokens ? _cvtsh_ss(bits[t * groups + grp]) : 0.0f;
  }
  const float midpoint = v_code_midpoint(Format::Q4);
  for (int grp = 0; grp < groups; ++grp) {
    __m256 mx = _mm256_setzero_ps();
    for (int i = 0; i < padded; i += 8) mx = _mm256_max_ps(mx, _mm256_load_ps(s.vs[grp] + i));
    const float max_vs = hmax1(mx);
    const __m256 inv = _mm256_set1_ps(weight_inverse(max_vs));
    // All heads per block of 32 tokens: the block's scaled V scales serve every head, and the
    // four weight sums are reduced together.
    __m256i total[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
    for (int i = 0; i < padded; i += 32) {
      __m256 scales[4];
      for (int j = 0; j < 4; ++j) scales[j] = _mm256_mul_ps(_mm256_load_ps(s.vs[grp] + i + 8 * j), inv);
      for (int g = 0; g < NG; ++g) {
        __m256i w[4];
        for (int j = 0; j < 4; ++j) w[j] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_load_ps(s.p[g] + i + 8 * j), scales[j]));
        total[g] = _mm256_add_epi32(total[g], _mm256_add_epi32(_mm256_add_epi32(w[0], w[1]), _mm256_add_epi32(w[2], w[3])));
        _mm256_store_si256(reinterpret_cast<__m256i*>(s.w[grp][g] + i), pack32_epi8(w[0], w[1], w[2], w[3]));
      }
    }
    // Lane g: the sum of total[g]'s eight lanes.
    const __m256i pairs = _mm256_hadd_epi32(_mm256_hadd_epi32(total[0], total[1]), _mm256_hadd_epi32(total[2], total[3]));
    alignas(16) std::int32_t sum_w[4];
    _mm_store_si128(reinterpret_cast<__m128i*>(sum_w), _mm_add_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1)));
    for (int g = 0; g < NG; ++g) {
      s.w_scale[grp][g] = max_vs * (head_scale[g] * page_scale[g]);
      s.w_shift[grp][g] = midpoint * static_cast<float>(sum_w[g]);
    }
  }
}

// Lane-wise weight_inverse of four values.
inline __m128 weight_inverse4(__m128 scale) {
  const __m128 inv = _mm_div_ps(_mm_set1_ps(1.0f), scale);
  const __m128 keep = _mm_and_ps(_mm_cmpgt_ps(scale, _mm_setzero_ps()), _mm_cmplt_ps(inv, _mm_set1_ps(INFINITY)));
  return _mm_and_ps(inv, keep);
}

// Eight tokens' weights of four heads, int32 [t h0..h3 | t+1 h0..h3] for the pairs (t, t+1) of
// w0..w3, as bytes [pair][head][token of the pair]: the packs leave the even tokens in the low
// lane and the odd ones in the high lane; a quad permute and a byte shuffle interleave them.
inline __m256i pack_pairs(__m256i w0, __m256i w1, __m256i w2, __m256i w3) {
  const __m256i x = _mm256_packs_epi16(_mm256_packs_epi32(w0, w1), _mm256_packs_epi32(w2, w3));
  const __m256i y = _mm256_permute4x64_epi64(x, 0xD8);
  const __m256i interleave = _mm256_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15,  //
                                              0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
  return _mm256_shuffle_epi8(y, interleave);
}

// quantize_weights for a chunk of four heads, with the same integers (int_dot.h), written as
// [group][token pair][head][token of the pair]: p's [token][head] vectors are used as they are,
// so neither p nor the V scales are transposed, and each pair's four weights sit together for
// the value pass. For four V groups (head_dim 128, groups of 32) a token pair's scales are one
// f16 load, and each group's scale is spread over its heads' lanes by an in-lane permute.
inline void quantize_weights_pairs(const PageView& page, const float* p, const float* p_sum, const float* page_scale, IntScratch& s) {
  const PageLayout& layout = *page.layout;
  const int groups = layout.v_groups();
  const int tokens = page.tokens;
  const int end = (tokens + 7) & ~7;  // whole blocks of four pairs; p is zero past the page's tokens
  const __m128 head_scale = _mm_max_ps(_mm_div_ps(_mm_loadu_ps(p_sum), _mm_set1_ps(static_cast<float>(weight_sum_limit(tokens)))),
                                       _mm_set1_ps(1.0f / kWeightCodeMax));  // weight_head_scale with p_max 1
  const __m128 head_inverse = weight_inverse4(head_scale);
  const __m256 hinv = _mm256_set_m128(head_inverse, head_inverse);
  const auto* bits = layout.at<std::uint16_t>(page.data, layout.v_scale);
  // Pairs with a token past the page's tokens get scale 0 there: the rows read for them are a
  // partial page's unused rows, padding or the key bounds (inside the page, but not scales).
  const __m256i lane_token = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  const auto valid = [&](int t) { return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(tokens - t), lane_token)); };
  const float midpoint = v_code_midpoint(Format::Q4);
  alignas(16) float max_vs[kMaxIntVGroups];
  alignas(32) std::int32_t sums[kMaxIntVGroups][8];  // per group: lane h and h + 4, head h's even and odd tokens
  // One group of a block of four pairs: weights, their sums and their bytes.
  const auto block = [&](int t, int grp, const __m256* pv, const __m256* scales, __m256i& total) __attribute__((always_inline)) {
    __m256i w[4];
    for (int j = 0; j < 4; ++j) w[j] = _mm256_cvtps_epi32(_mm256_mul_ps(pv[j], scales[j]));
    total = _mm256_add_epi32(total, _mm256_add_epi32(_mm256_add_epi32(w[0], w[1]), _mm256_add_epi32(w[2], w[3])));
    _mm256_store_si256(reinterpret_cast<__m256i*>(s.group_weights(grp) + 4 * t), pack_pairs(w[0], w[1], w[2], w[3]));
  };
  const auto weights = [&](int t, __m256* pv) __attribute__((always_inline)) {
    for (int j = 0; j < 4; ++j) pv[j] = _mm256_mul_ps(_mm256_loadu_ps(p + (t + 2 * j) * 4), hinv);
  };
  const int full = tokens & ~7;  // blocks without a pair past the page's tokens
  if (groups == 4) {
    const auto pair_scales = [&](int t) __attribute__((always_inline)) {
      return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bits + t * 4)));
    };
    __m256 mx0 = _mm256_setzero_ps(), mx1 = mx0;
    for (int t = 0; t < full; t += 4) {
      mx0 = _mm256_max_ps(mx0, pair_scales(t));
      mx1 = _mm256_max_ps(mx1, pair_scales(t + 2));
    }
    for (int t = full; t < tokens; t += 2) mx0 = _mm256_max_ps(mx0, _mm256_and_ps(pair_scales(t), valid(t)));
    mx0 = _mm256_max_ps(mx0, mx1);
    const __m128 m = _mm_max_ps(_mm256_castps256_ps128(mx0), _mm256_extractf128_ps(mx0, 1));  // lane: group
    _mm_store_ps(max_vs, m);
    const __m128 group_inverse = weight_inverse4(m);
    const __m256 ginv = _mm256_set_m128(group_inverse, group_inverse);
    __m256i total0 = _mm256_setzero_si256(), total1 = total0, total2 = total0, total3 = total0;
    const auto groups4 = [&](int t, const __m256* xs) __attribute__((always_inline)) {
      __m256 pv[4], scales[4];
      weights(t, pv);
      for (int j = 0; j < 4; ++j) scales[j] = _mm256_permute_ps(xs[j], 0x00);
      block(t, 0, pv, scales, total0);
      for (int j = 0; j < 4; ++j) scales[j] = _mm256_permute_ps(xs[j], 0x55);
      block(t, 1, pv, scales, total1);
      for (int j = 0; j < 4; ++j) scales[j] = _mm256_permute_ps(xs[j], 0xAA);
      block(t, 2, pv, scales, total2);
      for (int j = 0; j < 4; ++j) scales[j] = _mm256_permute_ps(xs[j], 0xFF);
      block(t, 3, pv, scales, total3);
    };
    for (int t = 0; t < full; t += 8) {
      __m256 xs[4];
      for (int j = 0; j < 4; ++j) xs[j] = _mm256_mul_ps(pair_scales(t + 2 * j), ginv);
      groups4(t, xs);
    }
    if (full < end) {
      __m256 xs[4];
      for (int j = 0; j < 4; ++j) xs[j] = _mm256_mul_ps(_mm256_and_ps(pair_scales(full + 2 * j), valid(full + 2 * j)), ginv);
      groups4(full, xs);
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums[0]), total0);
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums[1]), total1);
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums[2]), total2);
    _mm256_store_si256(reinterpret_cast<__m256i*>(sums[3]), total3);
  } else {
    // Other group counts: group-major scales times the group's inverse, zero past the tokens.
    for (int grp = 0; grp < groups; ++grp) {
      float mx = 0.0f;
      for (int t = 0; t < tokens; ++t) mx = std::max(mx, _cvtsh_ss(bits[t * groups + grp]));
      max_vs[grp] = mx;
      const float inv = weight_inverse(mx);
      for (int t = 0; t < end; ++t) s.vs[grp][t] = t < tokens ? _cvtsh_ss(bits[t * groups + grp]) * inv : 0.0f;
    }
    for (int grp = 0; grp < groups; ++grp) {
      __m256i total = _mm256_setzero_si256();
      for (int t = 0; t < end; t += 8) {
        __m256 pv[4], scales[4];
        weights(t, pv);
        const float* vs = s.vs[grp] + t;
        for (int j = 0; j < 4; ++j) scales[j] = _mm256_set_m128(_mm_set1_ps(vs[2 * j + 1]), _mm_set1_ps(vs[2 * j]));
        block(t, grp, pv, scales, total);
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(sums[grp]), total);
    }
  }
  alignas(16) float hs[4];
  _mm_store_ps(hs, head_scale);
  for (int grp = 0; grp < groups; ++grp) {
    for (int g = 0; g < 4; ++g) {
      s.w_scale[grp][g] = max_vs[grp] * (hs[g] * page_scale[g]);
      s.w_shift[grp][g] = midpoint * static_cast<float>(sums[grp][g] + sums[grp][g + 4]);
    }
  }
}

// The 32 channels c0..c0+31 of one V group: token pairs are interleaved byte by byte so that
// vpmaddubsw multiplies each pair of codes with the pair's two weights. grp: the V group of the
// block; row_bytes: the page's V row bytes (both from the caller, once per page: a division and a
// call per block were a tenth of a hot page's time).
template <int NG, bool kHigh>
void accumulate_block_int(const PageView& page, int c0, int grp, std::size_t row_bytes, float* states,
                          std::size_t stride, const float* rescale, const IntScratch& s, PagePrefetch& prefetch) {
  const PageLayout& layout = *page.layout;
  const std::uint8_t* rows = layout.at<std::uint8_t>(page.data, layout.v_data) + (c0 & ~63) / 2;
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  // Channels [0..7 | 16..23] (lo) and [8..15 | 24..31] (hi) of the block, per head. Named, not
  // arrays: with arrays g++ added into a temporary and copied it back to each accumulator, and
  // spilled one, on every iteration.
  __m256i lo0 = _mm256_setzero_si256(), lo1 = lo0, lo2 = lo0, lo3 = lo0;
  __m256i hi0 = lo0, hi1 = lo0, hi2 = lo0, hi3 = lo0;
  // A last odd token pairs with the row after it, whose weight is 0 (s.w is zero past the
  // page's tokens): that row lies inside the page (the V scales follow the V data and take at
  // least a row, page_layout.h), so the loop needs no branch per pair. The heads' weights sit a fixed stride apart, so one pointer serves all four
  // (layouts: IntScratch::w).
  constexpr std::size_t kHeadStride = NG == 4 ? 2 : sizeof(s.w[0][0]);
  constexpr std::size_t kPairStride = NG == 4 ? 2 * NG : 2;
  const std::int8_t* w = s.group_weights(grp);
  for (int t = 0; t < page.tokens; t += 2, rows += 2 * row_bytes, w += kPairStride) {
    if (t % kPrefetchTokensV == 0) prefetch.step();
    __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows));
    __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rows + row_bytes));
    if constexpr (kHigh) {
      x = _mm256_srli_epi16(x, 4);
      y = _mm256_srli_epi16(y, 4);
    }
    const __m256i z0 = _mm256_and_si256(_mm256_unpacklo_epi8(x, y), nibble);
    const __m256i z1 = _mm256_and_si256(_mm256_unpackhi_epi8(x, y), nibble);
    const auto head = [&](__m256i& lo, __m256i& hi, int g) __attribute__((always_inline)) {
      std::int16_t pair;
      std::memcpy(&pair, w + g * kHeadStride, sizeof(pair));
      const __m256i wv = _mm256_set1_epi16(pair);
      lo = _mm256_add_epi16(lo, _mm256_maddubs_epi16(z0, wv));
      hi = _mm256_add_epi16(hi, _mm256_maddubs_epi16(z1, wv));
    };
    head(lo0, hi0, 0);
    if constexpr (NG > 1) head(lo1, hi1, 1);
    if constexpr (NG > 2) head(lo2, hi2, 2);
    if constexpr (NG > 3) head(lo3, hi3, 3);
  }
  const __m256i lo[4] = {lo0, lo1, lo2, lo3}, hi[4] = {hi0, hi1, hi2, hi3};
  for (int g = 0; g < NG; ++g) {
    const __m256i first = _mm256_permute2x128_si256(lo[g], hi[g], 0x20);   // channels 0..15
    const __m256i second = _mm256_permute2x128_si256(lo[g], hi[g], 0x31);  // channels 16..31
    const __m256i parts[4] = {_mm256_cvtepi16_epi32(_mm256_castsi256_si128(first)),
                              _mm256_cvtepi16_epi32(_mm256_extracti128_si256(first, 1)),
                              _mm256_cvtepi16_epi32(_mm256_castsi256_si128(second)),
                              _mm256_cvtepi16_epi32(_mm256_extracti128_si256(second, 1))};
    const __m256 scale = _mm256_set1_ps(s.w_scale[grp][g]);
    const __m256 shift = _mm256_set1_ps(s.w_shift[grp][g]);
    const __m256 keep = _mm256_set1_ps(rescale[g]);
    float* out = states + g * stride + 2 + c0;
    for (int j = 0; j < 4; ++j) {
      const __m256 contribution = _mm256_mul_ps(scale, _mm256_sub_ps(_mm256_cvtepi32_ps(parts[j]), shift));
      _mm256_storeu_ps(out + 8 * j, _mm256_fmadd_ps(_mm256_loadu_ps(out + 8 * j), keep, contribution));
    }
  }
}

// out[g] = rescale[g] * out[g] + the page's weighted q4 values, with 7-bit weights (int_dot.h).
// p: page-relative softmax numerators [token][head], zero past the page's tokens up to a
// multiple of 32; p_sum and page_scale: their sum and factor per head (softmax_update).
template <int NG>
void accumulate_values_int(const PageView& page, const float* p, const float* p_sum, const float* page_scale, float* states,
                           const float* rescale, PagePrefetch& prefetch) {
  IntScratch& s = int_scratch();
  if constexpr (NG == 4) {
    quantize_weights_pairs(page, p, p_sum, page_scale, s);
  } else {
    quantize_weights<NG>(page, p, p_sum, page_scale, s);
  }
  const int dim = page.layout->head_dim;
  const int v_group = page.layout->v_group;  // a multiple of 32 (int_dot.h)
  const std::size_t row_bytes = page.layout->v_row_bytes();
  const std::size_t stride = static_cast<std::size_t>(dim) + 2;
  int grp = 0, group_end = v_group;  // the V group of channel c0, without a division per block
  for (int c0 = 0; c0 < dim; c0 += 32) {
    if (c0 == group_end) {
      ++grp;
      group_end += v_group;
    }
    if (c0 % 64 == 0) {
      accumulate_block_int<NG, false>(page, c0, grp, row_bytes, states, stride, rescale, s, prefetch);
    } else {
      accumulate_block_int<NG, true>(page, c0, grp, row_bytes, states, stride, rescale, s, prefetch);
    }
  }
}

}  // namespace
}  // namespace kv
