// The fused decode kernel, written once against vector traits (V8 in simd_avx2.h, V16 in
// simd_avx512.h) and compiled into each ISA's translation unit with its flags. Internal
// linkage throughout, like prefill_tile_impl.h.
//
// K and V codes are turned into floats in registers and never written back. Format scales are
// folded out of the inner loops: K's per-channel scale goes into the query (q' = q * scale,
// plus a bias q . zero), V's per-token group scale into the softmax weight. Heads of a GQA
// group are processed up to four at a time so each K/V vector is unpacked once for all of
// them. Per page: fold query -> scores -> online-softmax update -> weighted V sum. q4 K and V
// take integer dot products instead where int_dot.h says so (decode_int_impl.h).
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "attention/arch/x86/decode_int_impl.h"
#include "attention/page_prefetch.h"
#include "attention/softmax_state.h"
#include "quant/codes.h"
#include "quant/page_layout.h"

namespace kv {
namespace {

constexpr int kMaxChunkHeads = 4;

// Per-thread scratch: folded queries, scores and V weights of one head chunk.
struct Scratch {
  std::vector<float> folded;   // [heads][dim]
  std::vector<float> scores;   // [heads][page_tokens rounded to 8]
  std::vector<float> weights;  // [page_tokens][v_groups][heads]
};
Scratch& scratch() {
  // local-exec: a fixed offset from the thread pointer; our executables link the kernels
  // statically. Under the build's initial-exec model (CMakeLists.txt) g++ 12 sometimes
  // addresses a kernel scratch through `lea s@gottpoff(%rip)`, which ld cannot relax ("TLS
  // transition from R_X86_64_GOTTPOFF to R_X86_64_TPOFF32 failed"): the link broke on unrelated
  // kernel edits.
  static thread_local Scratch s __attribute__((tls_model("local-exec")));
  return s;
}

// Multiplier that turns a raw payload value into the stored value, for page-wide scales.
template <Format F>
float page_raw_scale(const PageLayout& layout, const std::byte* page, std::size_t scale_offset) {
  if constexpr (F == Format::FP8) return *layout.at<float>(page, scale_offset) * 256.0f;
  return 1.0f;
}

template <typename V, Format FK, int NG>
void fold_query(const PageView& page, const float* q, float* folded, float* bias) {
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  if constexpr (FK == Format::Q8 || FK == Format::Q4 || FK == Format::Q2) {
    const float* scale = layout.at<float>(page.data, layout.k_scale);
    const float* zero = layout.at<float>(page.data, layout.k_zero);
    for (int g = 0; g < NG; ++g) {
      typename V::F b = V::zero();
      for (int c = 0; c < dim; c += V::kWidth) {
        const typename V::F qv = V::load(q + g * dim + c);
        V::store(folded + g * dim + c, V::mul(qv, V::load(scale + c)));
        b = V::fmadd(qv, V::load(zero + c), b);
      }
      bias[g] = hsum(V::fold(b));
    }
  } else {
    const typename V::F scale = V::set1(page_raw_scale<FK>(layout, page.data, layout.k_scale));
    for (int g = 0; g < NG; ++g) {
      for (int c = 0; c < dim; c += V::kWidth) {
        V::store(folded + g * dim + c, V::mul(V::load(q + g * dim + c), scale));
      }
      bias[g] = 0.0f;
    }
  }
}

// scores[g][t] = q'[g] . raw(k[t]) + bias[g]. Accumulators are named, not an array, so the
// compiler keeps them in registers.
template <typename V, Format FK, int NG>
void score_tokens(const PageView& page, const float* q, Scratch& s, PagePrefetch& prefetch) {
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  float* folded = s.folded.data();
  float bias[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  fold_query<V, FK, NG>(page, q, folded, bias);
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
    prefetch.step();
    typename V::F a0 = V::zero(), a1 = a0, a2 = a0, a3 = a0;
    typename V::F b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int c = 0; c < dim; c += V::kWidth) {
      const typename V::F k8 = V::template load_raw<FK>(row, c, dim);
      const typename V::F n8 = V::template load_raw<FK>(row + row_bytes, c, dim);
      const typename V::F q0 = V::load(f0 + c);
      a0 = V::fmadd(q0, k8, a0);
      b0 = V::fmadd(q0, n8, b0);
      if constexpr (NG > 1) {
        const typename V::F q1 = V::load(f1 + c);
        a1 = V::fmadd(q1, k8, a1);
        b1 = V::fmadd(q1, n8, b1);
      }
      if constexpr (NG > 2) {
        const typename V::F q2 = V::load(f2 + c);
        a2 = V::fmadd(q2, k8, a2);
        b2 = V::fmadd(q2, n8, b2);
      }
      if constexpr (NG > 3) {
        const typename V::F q3 = V::load(f3 + c);
        a3 = V::fmadd(q3, k8, a3);
        b3 = V::fmadd(q3, n8, b3);
      }
    }
    alignas(16) float sums[8];
    _mm_store_ps(sums, hsum4(V::fold(a0), V::fold(a1), V::fold(a2), V::fold(a3)));
    _mm_store_ps(sums + 4, hsum4(V::fold(b0), V::fold(b1), V::fold(b2), V::fold(b3)));
    for (int g = 0; g < NG; ++g) {
      scores[t * NG + g] = sums[g] + bias[g];
      scores[(t + 1) * NG + g] = sums[4 + g] + bias[g];
    }
  }
  if (t < page.tokens) {
    typename V::F a0 = V::zero(), a1 = a0, a2 = a0, a3 = a0;
    for (int c = 0; c < dim; c += V::kWidth) {
      const typename V::F k8 = V::template load_raw<FK>(row, c, dim);
      a0 = V::fmadd(V::load(f0 + c), k8, a0);
      if constexpr (NG > 1) a1 = V::fmadd(V::load(f1 + c), k8, a1);
      if constexpr (NG > 2) a2 = V::fmadd(V::load(f2 + c), k8, a2);
      if constexpr (NG > 3) a3 = V::fmadd(V::load(f3 + c), k8, a3);
    }
    alignas(16) float sums[4];
    _mm_store_ps(sums, hsum4(V::fold(a0), V::fold(a1), V::fold(a2), V::fold(a3)));
    for (int g = 0; g < NG; ++g) scores[t * NG + g] = sums[g] + bias[g];
  }
}

// Scores ([token][head]) become softmax weights against the new running max. Writes the
// per-head rescale factor of the old state and updates each state's max and sum.
// kPageRelative (the integer V pass): the weights are exp(score - page max) instead, so that
// they do not depend on the running max earlier pages set, and decode in batches (l0_copy)
// rounds them to the same integers as decode in one pass; page_scale[g] = exp(page max - new
// max) carries head g's weights to the running max, and p_sum[g] is their sum.
template <int NG, bool kPageRelative = false>
void softmax_update(const PageView& page, float* states, int dim, float* rescale, float* page_lse, Scratch& s,
                    float* p_sum = nullptr, float* page_scale = nullptr) {
  const int count = page.tokens * NG;
  const int padded = (count + 7) & ~7;
  float* scores = s.scores.data();
  for (int i = count; i < padded; ++i) scores[i] = -INFINITY;
  // Independent chains for the maximum (two) and the sums (four, below): one chain of dependent
  // adds over a page's 32 vectors is a wait on the add latency.
  __m256 vmax = _mm256_set1_ps(-INFINITY), vmax2 = vmax;
  int j = 0;
  for (; j + 16 <= padded; j += 16) {
    vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(scores + j));
    vmax2 = _mm256_max_ps(vmax2, _mm256_loadu_ps(scores + j + 8));
  }
  for (; j < padded; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(scores + j));
  vmax = _mm256_max_ps(vmax, vmax2);
  const __m128 page_max = reduce_heads<NG>(vmax, [](__m128 a, __m128 b) { return _mm_max_ps(a, b); });
  // The heads' running maxima and sums as vectors (lanes past NG: an empty state), so that the
  // new maxima and the rescale factors take one vector max and one exp_ps, not a libm call per
  // head, and the exp loop below does not wait on scalar stores reloaded as a vector.
  float old_max[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, kept[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int g = 0; g < NG; ++g) {
    const SoftmaxState state(states + g * SoftmaxState::stride(dim), dim);
    old_max[g] = state.max();
    kept[g] = state.empty() ? 0.0f : 1.0f;  // exp_ps clamps at -87: an empty state's rescale is 0 by this
  }
  const __m128 before = _mm_setr_ps(old_max[0], old_max[1], old_max[2], old_max[3]);
  const __m128 after = _mm_max_ps(before, page_max);  // page maxima are finite (NaN/Inf never stored)
  // Upper lanes: exp(page max - new max), the page weights' factor when they are page-relative.
  const __m256 diff = _mm256_set_m128(_mm_sub_ps(page_max, after), _mm_sub_ps(before, after));  // <= 0, or -inf
  alignas(16) float new_max[4], factor[4], top[4], page_top[4];
  _mm_store_ps(new_max, after);
  _mm_store_ps(page_top, page_max);
  const __m256 exps = exp_ps(diff);
  _mm_store_ps(factor, _mm_mul_ps(_mm256_castps256_ps128(exps), _mm_setr_ps(kept[0], kept[1], kept[2], kept[3])));
  _mm_store_ps(top, _mm256_extractf128_ps(exps, 1));
  for (int g = 0; g < NG; ++g) rescale[g] = factor[g];
  const __m256 m = spread_heads<NG>(kPageRelative ? page_max : after);
  // Page-relative weights are rounded to 7 bits: the short polynomial's error is below that
  // rounding, and it is cheaper than the full one.
  const auto ex = [](__m256 x) __attribute__((always_inline)) { return kPageRelative ? exp_ps_fast(x) : exp_ps(x); };
  __m256 total = _mm256_setzero_ps(), total1 = total, total2 = total, total3 = total;
  int i = 0;
  for (; i + 32 <= count; i += 32) {
    const __m256 p0 = ex(_mm256_sub_ps(_mm256_loadu_ps(scores + i), m));
    const __m256 p1 = ex(_mm256_sub_ps(_mm256_loadu_ps(scores + i + 8), m));
    const __m256 p2 = ex(_mm256_sub_ps(_mm256_loadu_ps(scores + i + 16), m));
    const __m256 p3 = ex(_mm256_sub_ps(_mm256_loadu_ps(scores + i + 24), m));
    _mm256_storeu_ps(scores + i, p0);
    _mm256_storeu_ps(scores + i + 8, p1);
    _mm256_storeu_ps(scores + i + 16, p2);
    _mm256_storeu_ps(scores + i + 24, p3);
    total = _mm256_add_ps(total, p0);
    total1 = _mm256_add_ps(total1, p1);
    total2 = _mm256_add_ps(total2, p2);
    total3 = _mm256_add_ps(total3, p3);
  }
  total = _mm256_add_ps(_mm256_add_ps(total, total1), _mm256_add_ps(total2, total3));
  for (; i < padded; i += 8) {
    __m256 p = ex(_mm256_sub_ps(_mm256_loadu_ps(scores + i), m));
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
    state.max() = new_max[g];
    if constexpr (kPageRelative) {
      state.sum() = state.sum() * rescale[g] + sums[g] * top[g];
      if (page_lse != nullptr) page_lse[g] = page_top[g] + std::log(sums[g]);
      p_sum[g] = sums[g];
      page_scale[g] = top[g];
    } else {
      state.sum() = state.sum() * rescale[g] + sums[g];
      if (page_lse != nullptr) page_lse[g] = new_max[g] + std::log(sums[g]);
    }
  }
}

// Channels per pass of accumulate_values: two vectors where the head and, for integer formats,
// the V group allow, else one (the caller picks lanes that divide the V group).
template <typename V>
int value_block(const PageLayout& layout, bool integer) {
  const int two = 2 * V::kWidth;
  return layout.head_dim % two == 0 && (!integer || layout.v_group % two == 0) ? two : V::kWidth;
}

// out[g] = rescale[g] * out[g] + sum_t w[t][g] * v[t], 8 channels at a time with the
// accumulators in registers. Weights are laid out [t][group][head] so a token's NG weights are
// adjacent; the V midpoint of integer formats is subtracted once per block through the
// weight sums instead of once per value.
template <typename V, Format FV, int NG>
void accumulate_values(const PageView& page, float* states, const float* rescale, Scratch& s, PagePrefetch& prefetch) {
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  constexpr bool kInteger = FV == Format::Q8 || FV == Format::Q4 || FV == Format::Q2;
  const int groups = kInteger ? layout.v_groups() : 1;
  float* weights = s.weights.data();
  const float* p = s.scores.data();  // softmax weights, [token][head]
  float weight_sums[64 * 4] = {};    // [group][head]; groups <= 512 / 8
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
    const typename V::F page_scale = V::set1(page_raw_scale<FV>(layout, page.data, layout.v_scale));
    for (int i = 0; i < page.tokens * NG; i += V::kWidth) {
      V::store(weights + i, V::mul(V::load(p + i), page_scale));
    }
  }
  const std::uint8_t* rows = layout.at<std::uint8_t>(page.data, layout.v_data);
  const std::size_t row_bytes = layout.v_row_bytes();
  const std::size_t stride = SoftmaxState::stride(dim);
  const std::size_t token_step = static_cast<std::size_t>(groups) * NG;
  const float midpoint = kInteger ? v_code_midpoint(FV) : 0.0f;
  auto finish = [&](float* out, typename V::F acc, int g, int grp) {
    const typename V::F shift = V::set1(midpoint * weight_sums[grp * NG + g]);
    const typename V::F old = V::mul(V::load(out), V::set1(rescale[g]));
    V::store(out, V::add(old, V::sub(acc, shift)));
  };
  // Two vectors of channels per pass where head_dim allows (eight independent FMA chains).
  const int block = value_block<V>(layout, kInteger);
  for (int c = 0; c < dim; c += block) {
    const int grp = kInteger ? c / layout.v_group : 0;  // a block never spans two V groups
    float* o0 = states + 2 + c;
    const float* w = weights + grp * NG;
    const std::uint8_t* row = rows;
    typename V::F a0 = V::zero(), a1 = a0, a2 = a0, a3 = a0;
    typename V::F b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    if (block == 2 * V::kWidth) {
      for (int t = 0; t < page.tokens; ++t, row += row_bytes, w += token_step) {
        if (t % kPrefetchTokensV == 0) prefetch.step();
        const typename V::F v8 = V::template load_raw<FV>(row, c, dim);
        const typename V::F u8 = V::template load_raw<FV>(row, c + V::kWidth, dim);
        const typename V::F w0 = V::broadcast(w);
        a0 = V::fmadd(w0, v8, a0);
        b0 = V::fmadd(w0, u8, b0);
        if constexpr (NG > 1) {
          const typename V::F w1 = V::broadcast(w + 1);
          a1 = V::fmadd(w1, v8, a1);
          b1 = V::fmadd(w1, u8, b1);
        }
        if constexpr (NG > 2) {
          const typename V::F w2 = V::broadcast(w + 2);
          a2 = V::fmadd(w2, v8, a2);
          b2 = V::fmadd(w2, u8, b2);
        }
        if constexpr (NG > 3) {
          const typename V::F w3 = V::broadcast(w + 3);
          a3 = V::fmadd(w3, v8, a3);
          b3 = V::fmadd(w3, u8, b3);
        }
      }
    } else {
      for (int t = 0; t < page.tokens; ++t, row += row_bytes, w += token_step) {
        if (t % kPrefetchTokensV == 0) prefetch.step();
        const typename V::F v8 = V::template load_raw<FV>(row, c, dim);
        a0 = V::fmadd(V::broadcast(w), v8, a0);
        if constexpr (NG > 1) a1 = V::fmadd(V::broadcast(w + 1), v8, a1);
        if constexpr (NG > 2) a2 = V::fmadd(V::broadcast(w + 2), v8, a2);
        if constexpr (NG > 3) a3 = V::fmadd(V::broadcast(w + 3), v8, a3);
      }
    }
    const typename V::F acc_a[4] = {a0, a1, a2, a3};
    const typename V::F acc_b[4] = {b0, b1, b2, b3};
    for (int g = 0; g < NG; ++g) {
      finish(o0 + g * stride, acc_a[g], g, grp);
      if (block == 2 * V::kWidth) finish(o0 + g * stride + V::kWidth, acc_b[g], g, grp);
    }
  }
}

template <typename V, Format FK, Format FV, int NG>
void decode_chunk(const PageView& page, const float* q, float* states, float* page_lse) {
  Scratch& s = scratch();
  const PageLayout& layout = *page.layout;
  const auto dim = static_cast<std::size_t>(layout.head_dim);
  const auto tokens = static_cast<std::size_t>(layout.page_tokens);
  const auto groups = static_cast<std::size_t>(layout.v_groups());
  const std::size_t padded = (tokens + 31) & ~std::size_t{31};
  s.folded.resize(NG * dim);
  s.scores.resize(NG * padded + 16);  // slack for whole-vector loops
  s.weights.resize(NG * tokens * groups + 16);
  float rescale[NG];
  const IntDotPaths integer = int_dot_paths(layout, Isa::Avx2);  // both x86 paths share the rule
  const bool int_k = FK == Format::Q4 && integer.k, int_v = FV == Format::Q4 && integer.v;
  // The next page's bytes are requested a few lines per step of the K pass (one step per row
  // group) and of the V pass: spread over both, the requests keep the memory system busy
  // through the whole page instead of crowding the miss queue while K is scored and leaving it
  // idle after.
  const auto k_steps = static_cast<std::size_t>(page.tokens / (int_k ? 8 / NG : 2));
  // The integer V pass works in blocks of 32 channels (accumulate_values_int).
  const int v_block = int_v ? 32 : value_block<V>(layout, FV == Format::Q8 || FV == Format::Q4 || FV == Format::Q2);
  PagePrefetch prefetch(page.next, k_steps + value_prefetch_steps(page, v_block));
  if (int_k) {
    score_tokens_int<NG>(page, q, s.scores.data(), prefetch);
  } else {
    score_tokens<V, FK, NG>(page, q, s, prefetch);
  }
  float p_sum[4], page_scale[4];
  if (int_v) {
    softmax_update<NG, true>(page, states, layout.head_dim, rescale, page_lse, s, p_sum, page_scale);
  } else {
    softmax_update<NG>(page, states, layout.head_dim, rescale, page_lse, s);
  }
  if (int_v) {
    const std::size_t valid = static_cast<std::size_t>(page.tokens) * NG;
    std::fill(s.scores.begin() + static_cast<std::ptrdiff_t>(valid),
              s.scores.begin() + static_cast<std::ptrdiff_t>(NG * ((static_cast<std::size_t>(page.tokens) + 31) & ~std::size_t{31})), 0.0f);
    accumulate_values_int<NG>(page, s.scores.data(), p_sum, page_scale, states, rescale, prefetch);
  } else {
    accumulate_values<V, FV, NG>(page, states, rescale, s, prefetch);
  }
}

using ChunkFn = void (*)(const PageView&, const float*, float*, float*);

template <typename V, Format FK, int NG>
ChunkFn pick_v(Format v) {
  switch (v) {
    case Format::F32: return &decode_chunk<V, FK, Format::F32, NG>;
    case Format::F16: return &decode_chunk<V, FK, Format::F16, NG>;
    case Format::FP8: return &decode_chunk<V, FK, Format::FP8, NG>;
    case Format::Q8: return &decode_chunk<V, FK, Format::Q8, NG>;
    case Format::Q4: return &decode_chunk<V, FK, Format::Q4, NG>;
    case Format::Q2: return &decode_chunk<V, FK, Format::Q2, NG>;
  }
  return nullptr;
}

template <typename V, int NG>
ChunkFn pick(Format k, Format v) {
  switch (k) {
    case Format::F32: return pick_v<V, Format::F32, NG>(v);
    case Format::F16: return pick_v<V, Format::F16, NG>(v);
    case Format::FP8: return pick_v<V, Format::FP8, NG>(v);
    case Format::Q8: return pick_v<V, Format::Q8, NG>(v);
    case Format::Q4: return pick_v<V, Format::Q4, NG>(v);
    case Format::Q2: return pick_v<V, Format::Q2, NG>(v);
  }
  return nullptr;
}


// Folds one page into the states of `group` q heads, head chunks of 4, 2 and 1.
template <typename V>
void decode_page_simd(const PageView& page, const float* q, int group, float* states, float* page_lse) {
  if (page.tokens == 0) {
    if (page_lse != nullptr) std::fill(page_lse, page_lse + group, -INFINITY);
    return;
  }
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  int g = 0;
  while (g < group) {
    const int left = group - g;
    const int heads = left >= kMaxChunkHeads ? kMaxChunkHeads : (left >= 2 ? 2 : 1);
    ChunkFn fn = heads == 4 ? pick<V, 4>(layout.k_format, layout.v_format)
                            : heads == 2 ? pick<V, 2>(layout.k_format, layout.v_format)
                                         : pick<V, 1>(layout.k_format, layout.v_format);
    fn(page, q + static_cast<std::size_t>(g) * dim, states + g * SoftmaxState::stride(dim),
       page_lse != nullptr ? page_lse + g : nullptr);
    g += heads;
  }
}

// Quest's page bound, max over the group's q heads (page_kernels.h). The bounds are converted
// once per channel block and serve up to four q heads. max(q * lo, q * hi) is q * hi where
// q >= 0 and q * lo where q < 0 (lo <= hi): one select on the sign of q and one FMA.
template <typename V, int NG>
float page_bound_heads(const std::uint16_t* lo, const std::uint16_t* hi, const float* q, int dim) {
  typename V::F a0 = V::zero(), a1 = a0, a2 = a0, a3 = a0;
  for (int c = 0; c < dim; c += V::kWidth) {
    const typename V::F l = V::load_half(lo + c), h = V::load_half(hi + c);
    const typename V::F q0 = V::load(q + c);
    a0 = V::fmadd(q0, V::select_by_sign(q0, l, h), a0);
    if constexpr (NG > 1) {
      const typename V::F q1 = V::load(q + dim + c);
      a1 = V::fmadd(q1, V::select_by_sign(q1, l, h), a1);
    }
    if constexpr (NG > 2) {
      const typename V::F q2 = V::load(q + 2 * dim + c);
      a2 = V::fmadd(q2, V::select_by_sign(q2, l, h), a2);
    }
    if constexpr (NG > 3) {
      const typename V::F q3 = V::load(q + 3 * dim + c);
      a3 = V::fmadd(q3, V::select_by_sign(q3, l, h), a3);
    }
  }
  alignas(16) float sums[4];
  _mm_store_ps(sums, hsum4(V::fold(a0), V::fold(a1), V::fold(a2), V::fold(a3)));
  float best = sums[0];
  for (int g = 1; g < NG; ++g) best = sums[g] > best ? sums[g] : best;
  return best;
}

// bounds: f16 key_min then key_max, dim each.
template <typename V>
float page_bound_simd(const std::uint16_t* bounds, int dim, const float* q, int group) {
  const std::uint16_t* lo = bounds;
  const std::uint16_t* hi = bounds + dim;
  float best = -INFINITY;
  for (int g0 = 0; g0 < group; g0 += 4) {
    const float* qg = q + static_cast<std::size_t>(g0) * dim;
    const int heads = std::min(4, group - g0);
    const float bound = heads == 4   ? page_bound_heads<V, 4>(lo, hi, qg, dim)
                        : heads == 3 ? page_bound_heads<V, 3>(lo, hi, qg, dim)
                        : heads == 2 ? page_bound_heads<V, 2>(lo, hi, qg, dim)
                                     : page_bound_heads<V, 1>(lo, hi, qg, dim);
    best = bound > best ? bound : best;
  }
  return best;
}

// page_bound_simd over `count` pages (one call, so that one page's reduction overlaps the
// next page's loads).
template <typename V>
void page_bounds_simd(const std::uint16_t* bounds, std::size_t count, int dim, const float* q, int group, float* out) {
  const std::size_t stride = 2 * static_cast<std::size_t>(dim);
  // The common GQA group of four goes straight to its kernel, without page_bound_simd's loop
  // over head groups (measurably slower on long contexts).
  if (group == 4) {
    for (std::size_t i = 0; i < count; ++i) {
      const std::uint16_t* page = bounds + i * stride;
      out[i] = page_bound_heads<V, 4>(page, page + dim, q, dim);
    }
    return;
  }
  for (std::size_t i = 0; i < count; ++i) out[i] = page_bound_simd<V>(bounds + i * stride, dim, q, group);
}

}  // namespace
}  // namespace kv
