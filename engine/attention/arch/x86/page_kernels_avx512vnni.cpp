// AVX-512 VNNI decode of many q-head rows against one page: speculative verification (k draft
// queries times the GQA group, paged_attention.cpp's run_decode) and GQA groups wider than the
// fused kernel's chunks of four. q4 K and q4 V only, with the integer rules of int_dot.h, so the
// results are those of decode_simd_impl.h's integer path up to float rounding.
//
// The fused kernel unpacks each K and V code once per chunk of four rows and then spends most
// of its time per row (vpmaddubsw over a token's channels, a horizontal sum per score). Here a
// page's codes are unpacked and transposed once for all rows, into the layouts vpdpbusd wants:
// K as [position][16 tokens] dwords of four channels' codes, so that a row's score block is a
// chain of vpdpbusd against one broadcast dword of its int8 query (no horizontal sums); V as
// [token quad][16 channels] dwords of four tokens' codes, so that a row's output block is a
// chain of vpdpbusd against one broadcast dword of four tokens' 7-bit weights. Rows are then
// register-tiled four at a time against four blocks (of tokens, then of channels).
// Compiled with AVX-512 and VNNI flags; avx512::decode_page calls it after a CPUID check.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "attention/int_dot.h"
#include "attention/page_kernels.h"
#include "attention/page_prefetch.h"
#include "attention/softmax_state.h"
#include "attention/arch/x86/simd_avx512.h"
#include "quant/codes.h"
#include "quant/page_layout.h"

namespace kv::avx512vnni {
namespace {

constexpr int kRowChunk = 32;      // rows whose queries, scores and weights the scratch holds
constexpr int kTokenBlocks = kMaxPageTokens / 16;
constexpr int kMaxBytes = 256;     // head_dim limit: two 128-channel chunks of codes

struct alignas(64) Zmm {
  std::int32_t lane[16];
};

struct Scratch {
  std::vector<Zmm> kt;  // [token block][position]: position j holds four K channels (kt_channel)
  std::vector<Zmm> vt;  // [token quad][channel block]: four tokens' codes of 16 channels
  std::vector<Zmm> p;   // [row][token block]: scores, then page-relative numerators
  std::vector<Zmm> vs;  // [v group][token block]: V scales times the group's inverse
  std::vector<std::int8_t> w;  // [v group][row][token, 16-padded]: 7-bit weights
  alignas(64) std::int8_t q8[kRowChunk][kMaxBytes];  // int8 queries, channels in K's position order
  float q_scale[kRowChunk], q_bias[kRowChunk];
  float page_max[kRowChunk], p_sum[kRowChunk], rescale[kRowChunk], page_scale[kRowChunk];
  float w_scale[kMaxIntVGroups][kRowChunk], w_shift[kMaxIntVGroups][kRowChunk];
  alignas(64) float vs_raw[kMaxPageTokens * kMaxIntVGroups];
  // Per-row vectors whose lanes are reduced sixteen rows at a time (reduce_rows).
  Zmm lanes_a[kRowChunk], lanes_b[kRowChunk], lanes_w[kMaxIntVGroups][kRowChunk];
};
Scratch& scratch() {
  // local-exec: decode_simd_impl.h's scratch() says why.
  static thread_local Scratch s __attribute__((tls_model("local-exec")));
  return s;
}

__m512 as_ps(const Zmm& z) { return _mm512_load_ps(reinterpret_cast<const float*>(z.lane)); }
__m512i as_si(const Zmm& z) { return _mm512_load_si512(z.lane); }
void put(Zmm& z, __m512 v) { _mm512_store_ps(reinterpret_cast<float*>(z.lane), v); }
void put(Zmm& z, __m512i v) { _mm512_store_si512(z.lane, v); }

// exp_ps_fast (simd_avx2.h) at sixteen lanes: the same polynomial, for page-relative numerators
// that are rounded to 7 bits afterwards.
__attribute__((always_inline)) inline __m512 exp_fast16(__m512 x) {
  const __m512 t = _mm512_mul_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(1.44269504088896341f));
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 p = _mm512_set1_ps(1.3333558146e-3f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108665e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650696e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718056e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  const __m512i exponent = _mm512_slli_epi32(_mm512_cvtps_epi32(n), 23);
  return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), exponent));
}

// acc += the dot products of a's unsigned and b's signed bytes, four per lane. In asm: g++ 12
// does not tie the intrinsic's accumulator to its destination and copies every accumulator of a
// register tile once per step.
__attribute__((always_inline)) inline void dpbusd(__m512i& acc, __m512i a, __m512i b) {
  __asm__("vpdpbusd %[b], %[a], %[acc]" : [acc] "+v"(acc) : [a] "v"(a), [b] "v"(b));
}

// Lane i of the result: op over the sixteen lanes of v[i]. One pass for sixteen rows (45
// instructions) instead of a dependent shuffle chain and a scalar move per row.
template <typename Op>
__attribute__((always_inline)) inline __m512i reduce16(const Zmm* v, Op op) {
  __m512i a[8], b[4];
  for (int k = 0; k < 8; ++k) {
    const __m512i x = as_si(v[2 * k]), y = as_si(v[2 * k + 1]);
    a[k] = op(_mm512_unpacklo_epi32(x, y), _mm512_unpackhi_epi32(x, y));
  }
  // b[k], 128-bit lane L, element m: v[4k + m] over its lane L.
  for (int k = 0; k < 4; ++k) b[k] = op(_mm512_unpacklo_epi64(a[2 * k], a[2 * k + 1]), _mm512_unpackhi_epi64(a[2 * k], a[2 * k + 1]));
  const __m512i d0 = op(_mm512_shuffle_i32x4(b[0], b[1], 0x88), _mm512_shuffle_i32x4(b[0], b[1], 0xDD));
  const __m512i d1 = op(_mm512_shuffle_i32x4(b[2], b[3], 0x88), _mm512_shuffle_i32x4(b[2], b[3], 0xDD));
  return op(_mm512_shuffle_i32x4(d0, d1, 0x88), _mm512_shuffle_i32x4(d0, d1, 0xDD));
}
const auto add_ps = [](__m512i x, __m512i y) {
  return _mm512_castps_si512(_mm512_add_ps(_mm512_castsi512_ps(x), _mm512_castsi512_ps(y)));
};
const auto max_ps = [](__m512i x, __m512i y) {
  return _mm512_castps_si512(_mm512_max_ps(_mm512_castsi512_ps(x), _mm512_castsi512_ps(y)));
};
const auto add_epi32 = [](__m512i x, __m512i y) { return _mm512_add_epi32(x, y); };

// r[i] lane j -> r[j] lane i, sixteen dwords.
__attribute__((always_inline)) inline void transpose16(__m512i* r) {
  __m512i t[16], u[16];
  for (int k = 0; k < 8; ++k) {
    t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
    t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
  }
  // u[4k + m], 128-bit lane L: rows 4k..4k+3 of dword 4L + m.
  for (int k = 0; k < 4; ++k) {
    u[4 * k] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
    u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
    u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
  }
  for (int m = 0; m < 4; ++m) {
    const __m512i a = _mm512_shuffle_i32x4(u[m], u[4 + m], 0x88), b = _mm512_shuffle_i32x4(u[m], u[4 + m], 0xDD);
    const __m512i c = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0x88), d = _mm512_shuffle_i32x4(u[8 + m], u[12 + m], 0xDD);
    r[m] = _mm512_shuffle_i32x4(a, c, 0x88);
    r[8 + m] = _mm512_shuffle_i32x4(a, c, 0xDD);
    r[4 + m] = _mm512_shuffle_i32x4(b, d, 0x88);
    r[12 + m] = _mm512_shuffle_i32x4(b, d, 0xDD);
  }
}

// K positions: 64 bytes of q4 codes (128 channels, chunk z) give a low-nibble vector (channels
// [0..31 | 64..95] of the chunk) and a high-nibble one ([32..63 | 96..127]); position
// 32 z + 16 h + j is dword j of half h. In units of 32 channels, chunk z's order is
// (0, 2, 1, 3): the byte offset of natural channel c in a row of positions.
inline int position_byte(int c) {
  const int z = c / 128, within = c % 128;
  static constexpr int kOrder[4] = {0, 2, 1, 3};  // natural 32-channel unit -> position unit
  return z * 128 + kOrder[within / 32] * 32 + within % 32;
}

// N token rows from `first` of 64 bytes of q4 codes at byte `offset`, split into their low and
// high nibbles; rows from `valid` on are zero (past the page's tokens).
template <int N>
__attribute__((always_inline)) inline void unpack_rows(const std::uint8_t* rows, std::size_t row_bytes, int first, int valid,
                                                       int offset, __m512i* lo, __m512i* hi) {
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  for (int i = 0; i < N; ++i) {
    const __m512i x = i < valid ? _mm512_loadu_si512(rows + static_cast<std::size_t>(first + i) * row_bytes + offset)
                                : _mm512_setzero_si512();
    lo[i] = _mm512_and_si512(x, nibble);
    hi[i] = _mm512_and_si512(_mm512_srli_epi16(x, 4), nibble);
  }
}

// Unpacks and transposes the page's K codes into s.kt; rows past the page's tokens are zero.
void transpose_keys(const PageView& page, int token_blocks, int chunks, Scratch& s) {
  const PageLayout& layout = *page.layout;
  const std::uint8_t* rows = layout.at<std::uint8_t>(page.data, layout.k_data);
  const std::size_t row_bytes = layout.k_row_bytes();
  const int positions = 32 * chunks;
  for (int tb = 0; tb < token_blocks; ++tb) {
    const int valid = std::min(16, page.tokens - 16 * tb);
    for (int z = 0; z < chunks; ++z) {
      __m512i lo[16], hi[16];
      unpack_rows<16>(rows, row_bytes, 16 * tb, valid, 64 * z, lo, hi);
      transpose16(lo);
      transpose16(hi);
      Zmm* out = s.kt.data() + static_cast<std::size_t>(tb) * positions + 32 * z;
      for (int j = 0; j < 16; ++j) {
        put(out[j], lo[j]);
        put(out[16 + j], hi[j]);
      }
    }
  }
}

// Unpacks and transposes the page's V codes into s.vt, channel blocks in natural order; rows
// past the page's tokens are zero (their weights are zero too).
void transpose_values(const PageView& page, int quads, int chunks, Scratch& s) {
  const PageLayout& layout = *page.layout;
  const std::uint8_t* rows = layout.at<std::uint8_t>(page.data, layout.v_data);
  const std::size_t row_bytes = layout.v_row_bytes();
  const int blocks = 8 * chunks;
  // Byte index 16 L + 4 m + k of a nibble vector, tokens interleaved: d_m's 128-bit lane L.
  const auto interleave = [](const __m512i* x, Zmm* out, const int* block_of_lane) __attribute__((always_inline)) {
    const __m512i u_lo = _mm512_unpacklo_epi8(x[0], x[1]), u_hi = _mm512_unpackhi_epi8(x[0], x[1]);
    const __m512i w_lo = _mm512_unpacklo_epi8(x[2], x[3]), w_hi = _mm512_unpackhi_epi8(x[2], x[3]);
    const __m512i d0 = _mm512_unpacklo_epi16(u_lo, w_lo), d1 = _mm512_unpackhi_epi16(u_lo, w_lo);
    const __m512i d2 = _mm512_unpacklo_epi16(u_hi, w_hi), d3 = _mm512_unpackhi_epi16(u_hi, w_hi);
    const __m512i e0 = _mm512_shuffle_i32x4(d0, d1, 0x44), e1 = _mm512_shuffle_i32x4(d2, d3, 0x44);
    const __m512i f0 = _mm512_shuffle_i32x4(d0, d1, 0xEE), f1 = _mm512_shuffle_i32x4(d2, d3, 0xEE);
    put(out[block_of_lane[0]], _mm512_shuffle_i32x4(e0, e1, 0x88));
    put(out[block_of_lane[1]], _mm512_shuffle_i32x4(e0, e1, 0xDD));
    put(out[block_of_lane[2]], _mm512_shuffle_i32x4(f0, f1, 0x88));
    put(out[block_of_lane[3]], _mm512_shuffle_i32x4(f0, f1, 0xDD));
  };
  for (int t4 = 0; t4 < quads; ++t4) {
    const int valid = std::min(4, page.tokens - 4 * t4);
    for (int z = 0; z < chunks; ++z) {
      __m512i lo[4], hi[4];
      unpack_rows<4>(rows, row_bytes, 4 * t4, valid, 64 * z, lo, hi);
      // Lane L of the low nibbles holds channels 128 z + {0, 16, 64, 80}[L] + 0..15, of the
      // high nibbles 128 z + {32, 48, 96, 112}[L] + 0..15.
      const int lo_blocks[4] = {8 * z + 0, 8 * z + 1, 8 * z + 4, 8 * z + 5};
      const int hi_blocks[4] = {8 * z + 2, 8 * z + 3, 8 * z + 6, 8 * z + 7};
      Zmm* out = s.vt.data() + static_cast<std::size_t>(t4) * blocks;
      interleave(lo, out, lo_blocks);
      interleave(hi, out, hi_blocks);
    }
  }
}

// Folded int8 queries of rows [row0, row0 + count): q' = q * k_scale rounded to int8 against
// its largest magnitude, and the bias q . k_zero (int_dot.h).
template <int kChunks>
void prepare_queries(const PageView& page, const float* q, int count, Scratch& s) {
  const PageLayout& layout = *page.layout;
  constexpr int dim = 128 * kChunks;
  const float* k_scale = layout.at<float>(page.data, layout.k_scale);
  const float* k_zero = layout.at<float>(page.data, layout.k_zero);
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  // Per row: the largest |q'| and the bias as vectors, reduced sixteen rows at a time.
  for (int r = 0; r < count; ++r) {
    const float* qr = q + static_cast<std::size_t>(r) * dim;
    __m512 bias = _mm512_setzero_ps(), amax = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int i = 0; i < dim / 16; ++i) {
      const __m512 qv = _mm512_loadu_ps(qr + 16 * i);
      bias = _mm512_fmadd_ps(qv, _mm512_loadu_ps(k_zero + 16 * i), bias);
      amax = _mm512_max_ps(amax, _mm512_and_ps(_mm512_mul_ps(qv, _mm512_loadu_ps(k_scale + 16 * i)), abs_mask));
    }
    put(s.lanes_a[r], amax);
    put(s.lanes_b[r], bias);
  }
  alignas(64) float inverse[kRowChunk];
  for (int r0 = 0; r0 < count; r0 += 16) {
    const __m512 mx = _mm512_castsi512_ps(reduce16(s.lanes_a + r0, max_ps));
    const __m512 inv = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(mx, _mm512_setzero_ps(), _CMP_GT_OQ), _mm512_set1_ps(kQueryCodeMax), mx);
    _mm512_store_ps(inverse + r0, inv);
    _mm512_storeu_ps(s.q_scale + r0, _mm512_div_ps(mx, _mm512_set1_ps(kQueryCodeMax)));
    _mm512_storeu_ps(s.q_bias + r0, _mm512_castsi512_ps(reduce16(s.lanes_b + r0, add_ps)));
  }
  for (int r = 0; r < count; ++r) {
    const float* qr = q + static_cast<std::size_t>(r) * dim;
    const __m512 iv = _mm512_set1_ps(inverse[r]);
#pragma GCC unroll 16
    for (int i = 0; i < dim / 16; ++i) {
      const __m512 folded = _mm512_mul_ps(_mm512_loadu_ps(qr + 16 * i), _mm512_loadu_ps(k_scale + 16 * i));
      const __m128i bytes = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(folded, iv)));
      _mm_store_si128(reinterpret_cast<__m128i*>(s.q8[r] + position_byte(16 * i)), bytes);
    }
  }
}

// Scores of RB rows from row0 against TBG token blocks from tb0.
template <int RB, int TBG, int positions>
void score_tile(Scratch& s, int token_blocks, int row0, int tb0) {
  __m512i acc[RB][TBG];
#pragma GCC unroll 4
  for (int r = 0; r < RB; ++r) {
#pragma GCC unroll 4
    for (int b = 0; b < TBG; ++b) acc[r][b] = _mm512_setzero_si512();
  }
  const Zmm* kt = s.kt.data() + static_cast<std::size_t>(tb0) * positions;
#pragma GCC unroll 1
  for (int pos = 0; pos < positions; ++pos) {
    __m512i k[TBG];
#pragma GCC unroll 4
    for (int b = 0; b < TBG; ++b) k[b] = as_si(kt[b * positions + pos]);
#pragma GCC unroll 4
    for (int r = 0; r < RB; ++r) {
      std::int32_t word;
      std::memcpy(&word, s.q8[row0 + r] + 4 * pos, sizeof(word));
      const __m512i qv = _mm512_set1_epi32(word);
#pragma GCC unroll 4
      for (int b = 0; b < TBG; ++b) dpbusd(acc[r][b], k[b], qv);
    }
  }
#pragma GCC unroll 4
  for (int r = 0; r < RB; ++r) {
    const __m512 scale = _mm512_set1_ps(s.q_scale[row0 + r]), bias = _mm512_set1_ps(s.q_bias[row0 + r]);
    Zmm* out = s.p.data() + static_cast<std::size_t>(row0 + r) * token_blocks + tb0;
#pragma GCC unroll 4
    for (int b = 0; b < TBG; ++b) put(out[b], _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[r][b]), scale, bias));
  }
}

template <int RB, int positions>
void score_rows(Scratch& s, int token_blocks, int row0) {
  int tb = 0;
  for (; tb + 4 <= token_blocks; tb += 4) score_tile<RB, 4, positions>(s, token_blocks, row0, tb);
  switch (token_blocks - tb) {
    case 3: score_tile<RB, 3, positions>(s, token_blocks, row0, tb); break;
    case 2: score_tile<RB, 2, positions>(s, token_blocks, row0, tb); break;
    case 1: score_tile<RB, 1, positions>(s, token_blocks, row0, tb); break;
    default: break;
  }
}

// Page-relative numerators p = exp(score - page max) per row (zero past the page's tokens),
// their sums, and the states' new maxima and sums (decode_simd_impl.h's softmax_update with
// kPageRelative).
void softmax_rows(const PageView& page, int count, int token_blocks, float* states, int dim, float* page_lse, Scratch& s) {
  const std::size_t stride = SoftmaxState::stride(dim);
  const int tail = page.tokens - 16 * (token_blocks - 1);  // tokens of the last block, 1..16
  const __mmask16 last = static_cast<__mmask16>((1u << tail) - 1u);
  for (int r = 0; r < count; ++r) {
    Zmm* p = s.p.data() + static_cast<std::size_t>(r) * token_blocks;
    put(p[token_blocks - 1], _mm512_mask_blend_ps(last, _mm512_set1_ps(-INFINITY), as_ps(p[token_blocks - 1])));
    __m512 m = as_ps(p[0]);
    for (int b = 1; b < token_blocks; ++b) m = _mm512_max_ps(m, as_ps(p[b]));
    put(s.lanes_a[r], m);
  }
  // Page maxima, the old states' rescale factors and the pages' factors, sixteen rows a vector.
  for (int r0 = 0; r0 < count; r0 += 16) {
    alignas(64) float before[16], kept[16];
    for (int i = 0; i < 16; ++i) {
      const int r = r0 + i;
      const bool live = r < count;
      const SoftmaxState state(states + (live ? r : 0) * stride, dim);
      before[i] = live ? state.max() : 0.0f;
      kept[i] = live && !state.empty() ? 1.0f : 0.0f;
    }
    const __m512 pm = _mm512_castsi512_ps(reduce16(s.lanes_a + r0, max_ps));
    const __m512 b = _mm512_load_ps(before);
    const __m512 after = _mm512_max_ps(b, pm);
    _mm512_storeu_ps(s.page_max + r0, pm);
    _mm512_storeu_ps(s.rescale + r0, _mm512_mul_ps(exp_ps16(_mm512_sub_ps(b, after)), _mm512_load_ps(kept)));
    _mm512_storeu_ps(s.page_scale + r0, exp_ps16(_mm512_sub_ps(pm, after)));
  }
  for (int r = 0; r < count; ++r) {
    Zmm* p = s.p.data() + static_cast<std::size_t>(r) * token_blocks;
    const __m512 mx = _mm512_set1_ps(s.page_max[r]);
    __m512 sum = _mm512_setzero_ps();
    for (int b = 0; b < token_blocks; ++b) {
      __m512 x = exp_fast16(_mm512_sub_ps(as_ps(p[b]), mx));
      if (b == token_blocks - 1) x = _mm512_maskz_mov_ps(last, x);
      put(p[b], x);
      sum = _mm512_add_ps(sum, x);
    }
    put(s.lanes_b[r], sum);
  }
  for (int r0 = 0; r0 < count; r0 += 16) _mm512_storeu_ps(s.p_sum + r0, _mm512_castsi512_ps(reduce16(s.lanes_b + r0, add_ps)));
  for (int r = 0; r < count; ++r) {
    SoftmaxState state(states + r * stride, dim);
    state.max() = std::max(state.max(), s.page_max[r]);
    state.sum() = state.sum() * s.rescale[r] + s.p_sum[r] * s.page_scale[r];
    if (page_lse != nullptr) page_lse[r] = s.page_max[r] + std::log(s.p_sum[r]);
  }
}

// The V groups' scales over the page's tokens, times each group's inverse (zero past the
// tokens), and their maxima.
void value_scales(const PageView& page, int token_blocks, float* max_vs, Scratch& s) {
  const PageLayout& layout = *page.layout;
  const int groups = layout.v_groups();
  const auto* bits = layout.at<std::uint16_t>(page.data, layout.v_scale);
  const int count = page.tokens * groups;
  int i = 0;
  for (; i + 16 <= count; i += 16) {
    _mm512_store_ps(s.vs_raw + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(bits + i))));
  }
  for (; i < count; ++i) s.vs_raw[i] = _cvtsh_ss(bits[i]);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int g = 0; g < groups; ++g) {
    __m512 mx = _mm512_setzero_ps();
    Zmm* out = s.vs.data() + static_cast<std::size_t>(g) * token_blocks;
    for (int b = 0; b < token_blocks; ++b) {
      const __mmask16 valid = _mm512_cmplt_epi32_mask(_mm512_add_epi32(lane, _mm512_set1_epi32(16 * b)), _mm512_set1_epi32(page.tokens));
      const __m512i index = _mm512_add_epi32(_mm512_mullo_epi32(_mm512_add_epi32(lane, _mm512_set1_epi32(16 * b)), _mm512_set1_epi32(groups)),
                                             _mm512_set1_epi32(g));
      const __m512 v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, index, s.vs_raw, 4);
      put(out[b], v);
      mx = _mm512_max_ps(mx, v);
    }
    max_vs[g] = _mm512_reduce_max_ps(mx);
    const __m512 inv = _mm512_set1_ps(weight_inverse(max_vs[g]));
    for (int b = 0; b < token_blocks; ++b) put(out[b], _mm512_mul_ps(as_ps(out[b]), inv));
  }
}

// 7-bit weights per (V group, row): round((p * (1 / c)) * (v_scale * (1 / m))) (int_dot.h),
// their scales and shifts.
template <int groups>
void quantize_weights(const PageView& page, int count, int token_blocks, const float* max_vs, Scratch& s) {
  const std::size_t padded = 16 * static_cast<std::size_t>(token_blocks);
  const float midpoint = v_code_midpoint(Format::Q4);
  const float limit = static_cast<float>(weight_sum_limit(page.tokens));
  for (int r = 0; r < count; ++r) {
    // p's largest value is exp(0) = 1 (page-relative): weight_head_scale with p_max 1.
    const float head_scale = std::max(s.p_sum[r] / limit, 1.0f / kWeightCodeMax);
    const __m512 hinv = _mm512_set1_ps(weight_inverse(head_scale));
    __m512i total[groups];
    for (int g = 0; g < groups; ++g) total[g] = _mm512_setzero_si512();
    const Zmm* p = s.p.data() + static_cast<std::size_t>(r) * token_blocks;
    const auto weights = [&](int g, int b, __m512 x) __attribute__((always_inline)) {
      return _mm512_cvtps_epi32(_mm512_mul_ps(x, as_ps(s.vs[static_cast<std::size_t>(g) * token_blocks + b])));
    };
    int b = 0;
    // Four blocks at a time: two packs and a dword permute put 64 weights in token order,
    // cheaper than four vpmovdb.
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    for (; b + 4 <= token_blocks; b += 4) {
      __m512 x[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) x[j] = _mm512_mul_ps(as_ps(p[b + j]), hinv);
#pragma GCC unroll 8
      for (int g = 0; g < groups; ++g) {
        const __m512i w0 = weights(g, b, x[0]), w1 = weights(g, b + 1, x[1]);
        const __m512i w2 = weights(g, b + 2, x[2]), w3 = weights(g, b + 3, x[3]);
        total[g] = _mm512_add_epi32(total[g], _mm512_add_epi32(_mm512_add_epi32(w0, w1), _mm512_add_epi32(w2, w3)));
        const __m512i bytes = _mm512_packs_epi16(_mm512_packs_epi32(w0, w1), _mm512_packs_epi32(w2, w3));
        std::int8_t* out = s.w.data() + (static_cast<std::size_t>(g) * kRowChunk + r) * padded + 16 * b;
        _mm512_storeu_si512(out, _mm512_permutexvar_epi32(order, bytes));
      }
    }
    for (; b < token_blocks; ++b) {
      const __m512 x = _mm512_mul_ps(as_ps(p[b]), hinv);
#pragma GCC unroll 8
      for (int g = 0; g < groups; ++g) {
        const __m512i w = weights(g, b, x);
        total[g] = _mm512_add_epi32(total[g], w);
        std::int8_t* out = s.w.data() + (static_cast<std::size_t>(g) * kRowChunk + r) * padded + 16 * b;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm512_cvtepi32_epi8(w));
      }
    }
    for (int g = 0; g < groups; ++g) {
      s.w_scale[g][r] = max_vs[g] * (head_scale * s.page_scale[r]);
      put(s.lanes_w[g][r], total[g]);
    }
  }
  for (int g = 0; g < groups; ++g) {
    for (int r0 = 0; r0 < count; r0 += 16) {
      const __m512 sums = _mm512_cvtepi32_ps(reduce16(s.lanes_w[g] + r0, add_epi32));
      _mm512_storeu_ps(s.w_shift[g] + r0, _mm512_mul_ps(_mm512_set1_ps(midpoint), sums));
    }
  }
}

// Outputs of RB rows from row0, channel blocks cb0..cb0+3: states = rescale * states + the
// page's weighted values. kShare: channel blocks per V group within the four (2 or 4).
template <int RB, int kShare, int blocks>
void value_tile(Scratch& s, int quads, std::size_t padded, int row0, int cb0, int v_group, float* states,
                std::size_t stride) {
  __m512i acc[RB][4];
#pragma GCC unroll 16
  for (int r = 0; r < RB; ++r) {
#pragma GCC unroll 4
    for (int b = 0; b < 4; ++b) acc[r][b] = _mm512_setzero_si512();
  }
  // Row r's weights of the first V group of the four blocks; the second (kShare 2) follows
  // one group stride later.
  const int first_group = 16 * cb0 / v_group;
  const std::size_t group_stride = kRowChunk * padded;
  const std::int8_t* w = s.w.data() + (static_cast<std::size_t>(first_group) * kRowChunk + row0) * padded;
  const Zmm* vt = s.vt.data() + cb0;
#pragma GCC unroll 1
  for (int t4 = 0; t4 < quads; ++t4, vt += blocks, w += 4) {
    __m512i v[4];
#pragma GCC unroll 4
    for (int b = 0; b < 4; ++b) v[b] = as_si(vt[b]);
#pragma GCC unroll 16
    for (int r = 0; r < RB; ++r) {
#pragma GCC unroll 4
      for (int b = 0; b < 4; b += kShare) {
        std::int32_t word;
        std::memcpy(&word, w + r * padded + (b / kShare) * group_stride, sizeof(word));
        const __m512i wv = _mm512_set1_epi32(word);
#pragma GCC unroll 4
        for (int j = 0; j < kShare; ++j) dpbusd(acc[r][b + j], v[b + j], wv);
      }
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < RB; ++r) {
    const __m512 keep = _mm512_set1_ps(s.rescale[row0 + r]);
    float* out = states + static_cast<std::size_t>(row0 + r) * stride + 2 + 16 * cb0;
#pragma GCC unroll 4
    for (int b = 0; b < 4; ++b) {
      const int grp = first_group + b / kShare * (kShare == 2 ? 1 : 0);
      const __m512 scale = _mm512_set1_ps(s.w_scale[grp][row0 + r]);
      const __m512 shift = _mm512_set1_ps(s.w_shift[grp][row0 + r]);
      const __m512 contribution = _mm512_mul_ps(scale, _mm512_sub_ps(_mm512_cvtepi32_ps(acc[r][b]), shift));
      _mm512_storeu_ps(out + 16 * b, _mm512_fmadd_ps(_mm512_loadu_ps(out + 16 * b), keep, contribution));
    }
  }
}
template <int RB, int kShare, int blocks>
void value_rows(Scratch& s, int quads, std::size_t padded, int row0, int v_group, float* states, std::size_t stride) {
  for (int cb = 0; cb < blocks; cb += 4) value_tile<RB, kShare, blocks>(s, quads, padded, row0, cb, v_group, states, stride);
}

}  // namespace

bool decode_rows_applies(const PageLayout& layout) {
  const IntDotPaths paths = int_dot_paths(layout, Isa::Avx512);
  // head_dim 128 or 256: whole 64-byte loads of codes (V groups of 32 channels, or of 64 or
  // more, which a tile's four 16-channel blocks share).
  return paths.k && paths.v && (layout.head_dim == 128 || layout.head_dim == 256);
}

namespace {

// One page against `rows` rows, head_dim 128 * kChunks, kGroups V groups.
template <int kChunks, int kGroups>
void decode_rows_fixed(const PageView& page, const float* q, int rows, float* states, float* page_lse) {
  Scratch& s = scratch();
  const PageLayout& layout = *page.layout;
  constexpr int dim = 128 * kChunks, positions = 32 * kChunks, blocks = 8 * kChunks;
  constexpr int kShare = dim / kGroups == 32 ? 2 : 4;  // channel blocks of four that share a V group
  const std::size_t stride = SoftmaxState::stride(dim);
  const int token_blocks = (page.tokens + 15) / 16;
  const int quads = (page.tokens + 3) / 4;
  const std::size_t padded = 16 * static_cast<std::size_t>(token_blocks);
  if (s.kt.empty()) {
    s.kt.resize(static_cast<std::size_t>(kTokenBlocks) * 2 * 32);
    s.vt.resize(static_cast<std::size_t>(kMaxPageTokens / 4) * 2 * 8);
    s.p.resize(static_cast<std::size_t>(kRowChunk) * kTokenBlocks);
    s.vs.resize(static_cast<std::size_t>(kMaxIntVGroups) * kTokenBlocks);
    s.w.resize(static_cast<std::size_t>(kMaxIntVGroups) * kRowChunk * kMaxPageTokens);
  }
  // The next page is requested a few lines at a time, once per tile of four rows of the score
  // and value passes (decode_simd_impl.h's decode_chunk says why); requests during the
  // transposes, which wait on this page's own lines, were slower.
  const int row_tiles = (rows + 3) / 4;
  PagePrefetch prefetch(page.next, static_cast<std::size_t>(2 * row_tiles + 2));
  transpose_keys(page, token_blocks, kChunks, s);
  transpose_values(page, quads, kChunks, s);
  float max_vs[kMaxIntVGroups];
  value_scales(page, token_blocks, max_vs, s);
  for (int row0 = 0; row0 < rows; row0 += kRowChunk) {
    const int count = std::min(kRowChunk, rows - row0);
    float* chunk_states = states + static_cast<std::size_t>(row0) * stride;
    prepare_queries<kChunks>(page, q + static_cast<std::size_t>(row0) * dim, count, s);
    int r = 0;
    for (; r + 4 <= count; r += 4) {
      prefetch.step();
      score_rows<4, positions>(s, token_blocks, r);
    }
    prefetch.step();
    switch (count - r) {
      case 3: score_rows<3, positions>(s, token_blocks, r); break;
      case 2: score_rows<2, positions>(s, token_blocks, r); break;
      case 1: score_rows<1, positions>(s, token_blocks, r); break;
      default: break;
    }
    softmax_rows(page, count, token_blocks, chunk_states, dim, page_lse == nullptr ? nullptr : page_lse + row0, s);
    quantize_weights<kGroups>(page, count, token_blocks, max_vs, s);
    r = 0;
    for (; r + 4 <= count; r += 4) {
      prefetch.step();
      value_rows<4, kShare, blocks>(s, quads, padded, r, layout.v_group, chunk_states, stride);
    }
    prefetch.step();
    switch (count - r) {
      case 3: value_rows<3, kShare, blocks>(s, quads, padded, r, layout.v_group, chunk_states, stride); break;
      case 2: value_rows<2, kShare, blocks>(s, quads, padded, r, layout.v_group, chunk_states, stride); break;
      case 1: value_rows<1, kShare, blocks>(s, quads, padded, r, layout.v_group, chunk_states, stride); break;
      default: break;
    }
  }
}

}  // namespace

void decode_rows(const PageView& page, const float* q, int rows, float* states, float* page_lse) {
  const int chunks = page.layout->head_dim / 128;
  // V groups of 32, 64 or 128 channels or the whole head (int_dot.h; decode_rows_applies).
  switch (chunks * 16 + page.layout->v_groups()) {
    case 16 + 1: decode_rows_fixed<1, 1>(page, q, rows, states, page_lse); break;
    case 16 + 2: decode_rows_fixed<1, 2>(page, q, rows, states, page_lse); break;
    case 16 + 4: decode_rows_fixed<1, 4>(page, q, rows, states, page_lse); break;
    case 32 + 1: decode_rows_fixed<2, 1>(page, q, rows, states, page_lse); break;
    case 32 + 2: decode_rows_fixed<2, 2>(page, q, rows, states, page_lse); break;
    case 32 + 4: decode_rows_fixed<2, 4>(page, q, rows, states, page_lse); break;
    default: decode_rows_fixed<2, 8>(page, q, rows, states, page_lse); break;
  }
}

}  // namespace kv::avx512vnni
