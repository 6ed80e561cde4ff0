// The Arm decode kernel, written once and compiled into each Arm translation unit with its
// flags: plain NEON (float formats, and q8/q4/q2 turned into floats in registers), dotprod
// (SDOT for the q8/q4 integer paths of int_dot.h) and i8mm (USMMLA for K, two tokens by two q
// heads per instruction). Internal linkage throughout, like the x86 bodies.
//
// Per chunk of up to four q heads of a GQA group: scores (float, or an int8 query against the
// codes) -> online-softmax update -> weighted V sum (float, or 7-bit weights against q4 codes).
// Each K/V vector is turned into floats or codes once for every head of the chunk.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>

#include "attention/arch/arm/simd_neon.h"
#include "attention/int_dot.h"
#include "attention/page_kernels.h"
#include "attention/softmax_state.h"
#include "quant/codes.h"
#include "quant/fp16.h"
#include "quant/page_layout.h"

namespace kv {
namespace {

// The integer instructions a translation unit may use.
enum class ArmDot { None, Sdot, Mmla };

constexpr int kArmChunkHeads = 4;
constexpr int kArmMaxDim = 512;
constexpr int kArmTokens = kMaxPageTokens + 4;  // a page's tokens, rounded up to a multiple of 4
constexpr int kArmMaxVGroups = kArmMaxDim / 8;  // V groups are whole 8-channel blocks

struct ArmScratch {
  alignas(16) float folded[kArmChunkHeads][kArmMaxDim];
  alignas(16) float scores[kArmChunkHeads][kArmTokens];  // then the softmax numerators
  alignas(16) float weights[kArmMaxVGroups][kArmChunkHeads][kArmTokens];  // float V pass, [group][head][token]
  alignas(16) std::int8_t query[kArmChunkHeads][kArmMaxDim];     // int8 folded queries (q8: the high bytes)
  alignas(16) std::int8_t query_lo[kArmChunkHeads][kArmMaxDim];  // q8: the low bytes (quantize_query)
  alignas(16) std::int8_t query_pairs[kArmChunkHeads / 2][2 * kArmMaxDim];     // USMMLA: [pair][8 channels of h0, of h1]
  alignas(16) std::int8_t query_pairs_lo[kArmChunkHeads / 2][2 * kArmMaxDim];  // the same of query_lo
  alignas(16) std::int8_t w8[kMaxIntVGroups][kArmChunkHeads][kArmTokens];  // 7-bit V weights, [group][head][token]
  float w_scale[kMaxIntVGroups][kArmChunkHeads];
  float w_shift[kMaxIntVGroups][kArmChunkHeads];
};
ArmScratch& arm_scratch() {
  static thread_local ArmScratch s;
  return s;
}

constexpr bool integer_codes(Format f) { return f == Format::Q8 || f == Format::Q4 || f == Format::Q2; }

constexpr Isa arm_isa(ArmDot dot) {
  return dot == ArmDot::Mmla ? Isa::I8mm : dot == ArmDot::Sdot ? Isa::Dotprod : Isa::Neon;
}

// Multiplier that turns a raw payload value into the stored value, for page-wide scales.
template <Format F>
float arm_raw_scale(const PageLayout& layout, const std::byte* page, std::size_t scale_offset) {
  if constexpr (F == Format::FP8) return *layout.at<float>(page, scale_offset) * 256.0f;
  return 1.0f;
}

// scores[g][t] = q'[g] . raw(k[t]) + q[g] . zero: K scales folded into the query.
template <Format FK, int NG>
void score_float(const PageView& page, const float* q, ArmScratch& s) {
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  float bias[NG];
  for (int g = 0; g < NG; ++g) {
    const float* qg = q + g * dim;
    float* f = s.folded[g];
    bias[g] = 0.0f;
    if constexpr (integer_codes(FK)) {
      const float* scale = layout.at<float>(page.data, layout.k_scale);
      const float* zero = layout.at<float>(page.data, layout.k_zero);
      float32x4_t b = vdupq_n_f32(0.0f);
      for (int c = 0; c < dim; c += 4) {
        const float32x4_t qv = vld1q_f32(qg + c);
        vst1q_f32(f + c, vmulq_f32(qv, vld1q_f32(scale + c)));
        b = vfmaq_f32(b, qv, vld1q_f32(zero + c));
      }
      bias[g] = vaddvq_f32(b);
    } else {
      const float scale = arm_raw_scale<FK>(layout, page.data, layout.k_scale);
      for (int c = 0; c < dim; c += 4) vst1q_f32(f + c, vmulq_n_f32(vld1q_f32(qg + c), scale));
    }
  }
#if defined(KVBENCH_BREAK_NEON_KERNEL)
  // Test-only (CMake KVBENCH_BREAK_NEON_KERNEL): drop the last four channels of every score.
  const int scored = dim - 4;
#else
  const int scored = dim;
#endif
  const std::uint8_t* row = layout.at<std::uint8_t>(page.data, layout.k_data);
  const std::size_t row_bytes = layout.k_row_bytes();
  for (int t = 0; t < page.tokens; ++t, row += row_bytes) {
    // Two accumulators per head (head_dim is a multiple of 8): two independent FMA chains.
    float32x4_t a[NG], b[NG];
    for (int g = 0; g < NG; ++g) a[g] = b[g] = vdupq_n_f32(0.0f);
    int c = 0;
    for (; c + 8 <= scored; c += 8) {
      const float32x4_t k0 = load_raw4<FK>(row, c, dim), k1 = load_raw4<FK>(row, c + 4, dim);
      for (int g = 0; g < NG; ++g) {
        a[g] = vfmaq_f32(a[g], vld1q_f32(s.folded[g] + c), k0);
        b[g] = vfmaq_f32(b[g], vld1q_f32(s.folded[g] + c + 4), k1);
      }
    }
    for (; c < scored; c += 4) {
      const float32x4_t k0 = load_raw4<FK>(row, c, dim);
      for (int g = 0; g < NG; ++g) a[g] = vfmaq_f32(a[g], vld1q_f32(s.folded[g] + c), k0);
    }
    for (int g = 0; g < NG; ++g) s.scores[g][t] = vaddvq_f32(vaddq_f32(a[g], b[g])) + bias[g];
  }
}

// Codes of channels 16i..16i+15 of a K row as bytes (q4: 0..15; q8: the code, or for SDOT the
// code - 128 with the query's sum times 128 added back by the caller).
template <Format FK, bool kSigned>
inline uint8x16_t k_codes16(const std::uint8_t* row, int i) {
  if constexpr (FK == Format::Q4) {
    // Block b = i / 4 holds 32 bytes; i % 4 picks bytes 0..15 or 16..31 and the low or high nibble.
    const uint8x16_t x = vld1q_u8(row + 32 * (i / 4) + 16 * (i % 2));
    return (i % 4) < 2 ? vandq_u8(x, vdupq_n_u8(0x0F)) : vshrq_n_u8(x, 4);
  } else {
    const uint8x16_t x = vld1q_u8(row + 16 * i);
    return kSigned ? veorq_u8(x, vdupq_n_u8(0x80)) : x;
  }
}

// The folded, quantized query of one head (int_dot.h): query[c] (q4), or for q8's 14-bit codes
// q = 128 * query[c] + query_lo[c]. Returns the bias q . zero; step: max|q'| / code max; q_sum:
// the sum of the codes.
template <Format FK>
float quantize_query(const PageLayout& layout, const std::byte* page, const float* q, float* folded, std::int8_t* query,
                     std::int8_t* query_lo, float& step, std::int32_t& q_sum) {
  const int dim = layout.head_dim;
  const float* k_scale = layout.at<float>(page, layout.k_scale);
  const float* k_zero = layout.at<float>(page, layout.k_zero);
  float32x4_t b = vdupq_n_f32(0.0f), m = b;
  for (int c = 0; c < dim; c += 4) {
    const float32x4_t qv = vld1q_f32(q + c);
    const float32x4_t f = vmulq_f32(qv, vld1q_f32(k_scale + c));
    vst1q_f32(folded + c, f);
    b = vfmaq_f32(b, qv, vld1q_f32(k_zero + c));
    m = vmaxq_f32(m, vabsq_f32(f));
  }
  const float amax = vmaxvq_f32(m);
  const float code_max = query_code_max(FK);
  const float inv = amax > 0.0f ? code_max / amax : 0.0f;
  step = amax / code_max;
  int32x4_t sum = vdupq_n_s32(0);
  for (int c = 0; c < dim; c += 4) {
    const int32x4_t code = vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(folded + c), inv));
    sum = vaddq_s32(sum, code);
    std::int32_t lanes[4];
    if constexpr (FK == Format::Q8) {
      const int32x4_t hi = vshrq_n_s32(vaddq_s32(code, vdupq_n_s32(64)), 7);  // floor((q + 64) / 128)
      vst1q_s32(lanes, vsubq_s32(code, vshlq_n_s32(hi, 7)));
      for (int j = 0; j < 4; ++j) query_lo[c + j] = static_cast<std::int8_t>(lanes[j]);
      vst1q_s32(lanes, hi);
    } else {
      vst1q_s32(lanes, code);
    }
    for (int j = 0; j < 4; ++j) query[c + j] = static_cast<std::int8_t>(lanes[j]);
  }
  q_sum = vaddvq_s32(sum);
  return vaddvq_f32(b);
}

// Eight channels of two heads' query bytes side by side, per 8-channel chunk (USMMLA's right
// operand); a missing second head is zero.
inline void pair_queries(const std::int8_t* h0, const std::int8_t* h1, int dim, std::int8_t* out) {
  for (int k = 0; k < dim / 8; ++k) {
    std::memcpy(out + 16 * k, h0 + 8 * k, 8);
    if (h1 != nullptr) {
      std::memcpy(out + 16 * k + 8, h1 + 8 * k, 8);
    } else {
      std::memset(out + 16 * k + 8, 0, 8);
    }
  }
}

// scores[g][t] with an integer query against q4 or q8 codes (int_dot.h).
template <ArmDot D, Format FK, int NG>
void score_int(const PageView& page, const float* q, ArmScratch& s) {
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  constexpr bool kSplit = FK == Format::Q8;  // two query bytes a channel
  float bias[NG], step[NG];
  std::int32_t q_sum[NG];
  for (int g = 0; g < NG; ++g) {
    bias[g] = quantize_query<FK>(layout, page.data, q + g * dim, s.folded[g], s.query[g], s.query_lo[g], step[g], q_sum[g]);
  }
  const std::uint8_t* rows = layout.at<std::uint8_t>(page.data, layout.k_data);
  const std::size_t row_bytes = layout.k_row_bytes();
  const int chunks = dim / 16;
  const auto combine = [](std::int32_t hi, std::int32_t lo) { return kSplit ? 128 * hi + lo : hi; };
  if constexpr (D == ArmDot::Mmla) {
    // USMMLA: [2 tokens x 8 codes] times [2 heads x 8 query bytes]^T into [t0h0 t0h1 t1h0 t1h1].
    // Heads in pairs (an odd head pairs with a zero query), tokens in pairs (a last odd token
    // pairs with itself, its second results dropped). Codes stay unsigned.
    constexpr int kPairs = (NG + 1) / 2;
    for (int pr = 0; pr < kPairs; ++pr) {
      const bool second = 2 * pr + 1 < NG;
      pair_queries(s.query[2 * pr], second ? s.query[2 * pr + 1] : nullptr, dim, s.query_pairs[pr]);
      if constexpr (kSplit) pair_queries(s.query_lo[2 * pr], second ? s.query_lo[2 * pr + 1] : nullptr, dim, s.query_pairs_lo[pr]);
    }
    for (int t = 0; t < page.tokens; t += 2) {
      const std::uint8_t* r0 = rows + static_cast<std::size_t>(t) * row_bytes;
      const std::uint8_t* r1 = t + 1 < page.tokens ? r0 + row_bytes : r0;
      int32x4_t acc[kPairs], acc_lo[kPairs];
      for (int pr = 0; pr < kPairs; ++pr) acc[pr] = acc_lo[pr] = vdupq_n_s32(0);
      for (int i = 0; i < chunks; ++i) {
        const uint64x2_t x0 = vreinterpretq_u64_u8(k_codes16<FK, false>(r0, i));
        const uint64x2_t x1 = vreinterpretq_u64_u8(k_codes16<FK, false>(r1, i));
        const uint8x16_t lo = vreinterpretq_u8_u64(vzip1q_u64(x0, x1));  // channels 16i..16i+7 of both tokens
        const uint8x16_t hi = vreinterpretq_u8_u64(vzip2q_u64(x0, x1));  // 16i+8..16i+15
        for (int pr = 0; pr < kPairs; ++pr) {
          acc[pr] = vusmmlaq_s32(acc[pr], lo, vld1q_s8(s.query_pairs[pr] + 32 * i));
          acc[pr] = vusmmlaq_s32(acc[pr], hi, vld1q_s8(s.query_pairs[pr] + 32 * i + 16));
          if constexpr (kSplit) {
            acc_lo[pr] = vusmmlaq_s32(acc_lo[pr], lo, vld1q_s8(s.query_pairs_lo[pr] + 32 * i));
            acc_lo[pr] = vusmmlaq_s32(acc_lo[pr], hi, vld1q_s8(s.query_pairs_lo[pr] + 32 * i + 16));
          }
        }
      }
      for (int pr = 0; pr < kPairs; ++pr) {
        std::int32_t d[4], e[4] = {0, 0, 0, 0};
        vst1q_s32(d, acc[pr]);
        if constexpr (kSplit) vst1q_s32(e, acc_lo[pr]);
        for (int j = 0; j < 2 && 2 * pr + j < NG; ++j) {
          const int g = 2 * pr + j;
          s.scores[g][t] = static_cast<float>(combine(d[j], e[j])) * step[g] + bias[g];
          if (t + 1 < page.tokens) s.scores[g][t + 1] = static_cast<float>(combine(d[2 + j], e[2 + j])) * step[g] + bias[g];
        }
      }
    }
  } else {
    // SDOT: four products per 32-bit lane, both operands signed: q8 codes go as code - 128, and
    // 128 * sum(q) restores the dot product exactly.
    for (int t = 0; t < page.tokens; ++t) {
      const std::uint8_t* row = rows + static_cast<std::size_t>(t) * row_bytes;
      int32x4_t acc[NG], acc_lo[NG];
      for (int g = 0; g < NG; ++g) acc[g] = acc_lo[g] = vdupq_n_s32(0);
      for (int i = 0; i < chunks; ++i) {
        const int8x16_t codes = vreinterpretq_s8_u8(k_codes16<FK, kSplit>(row, i));
        for (int g = 0; g < NG; ++g) {
          acc[g] = vdotq_s32(acc[g], codes, vld1q_s8(s.query[g] + 16 * i));
          if constexpr (kSplit) acc_lo[g] = vdotq_s32(acc_lo[g], codes, vld1q_s8(s.query_lo[g] + 16 * i));
        }
      }
      for (int g = 0; g < NG; ++g) {
        const std::int32_t dot = combine(vaddvq_s32(acc[g]), vaddvq_s32(acc_lo[g])) + (kSplit ? 128 * q_sum[g] : 0);
        s.scores[g][t] = static_cast<float>(dot) * step[g] + bias[g];
      }
    }
  }
}

// Scores become softmax numerators. kPageRelative (the integer V pass): exp(score - page max),
// which do not depend on the running max (int_dot.h), with page_scale[g] = exp(page max - new
// max) carrying them to it; otherwise exp(score - new max). Updates each state's max and sum,
// writes the old state's rescale factor, the page's log-sum-exp and the numerators' sums.
template <int NG, bool kPageRelative>
void softmax_arm(const PageView& page, float* states, int dim, ArmScratch& s, float* rescale, float* page_lse,
                 float* p_sum, float* page_scale) {
  const int tokens = page.tokens;
  const int padded = (tokens + 3) & ~3;
  for (int g = 0; g < NG; ++g) {
    float* scores = s.scores[g];
    for (int t = tokens; t < padded; ++t) scores[t] = -INFINITY;
    float32x4_t m = vdupq_n_f32(-INFINITY);
    for (int t = 0; t < padded; t += 4) m = vmaxq_f32(m, vld1q_f32(scores + t));
    const float page_max = vmaxvq_f32(m);
    SoftmaxState state(states + g * SoftmaxState::stride(dim), dim);
    const float new_max = std::max(state.max(), page_max);  // page maxima are finite
    rescale[g] = state.empty() ? 0.0f : std::exp(state.max() - new_max);
    const float32x4_t shift = vdupq_n_f32(kPageRelative ? page_max : new_max);
    float32x4_t total = vdupq_n_f32(0.0f);
    for (int t = 0; t < padded; t += 4) {
      float32x4_t p = exp_f32x4(vsubq_f32(vld1q_f32(scores + t), shift));
      if (t + 4 > tokens) {  // zero the padding lanes of a partial vector
        const int32x4_t lane = {0, 1, 2, 3};
        p = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(p), vcltq_s32(lane, vdupq_n_s32(tokens - t))));
      }
      vst1q_f32(scores + t, p);
      total = vaddq_f32(total, p);
    }
    const float sum = vaddvq_f32(total);
    state.max() = new_max;
    if constexpr (kPageRelative) {
      page_scale[g] = std::exp(page_max - new_max);
      p_sum[g] = sum;
      state.sum() = state.sum() * rescale[g] + sum * page_scale[g];
      if (page_lse != nullptr) page_lse[g] = page_max + std::log(sum);
    } else {
      state.sum() = state.sum() * rescale[g] + sum;
      if (page_lse != nullptr) page_lse[g] = new_max + std::log(sum);
    }
  }
}

// out[g] = rescale[g] * out[g] + sum_t w[g][t] * (raw(v[t]) - midpoint), w = p * the token's
// group scale (integer formats) or the page's (fp8); 8 channels per pass, accumulators in
// registers, the midpoint subtracted once per block through the weight sums.
template <Format FV, int NG>
void values_float(const PageView& page, float* states, const float* rescale, ArmScratch& s) {
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  const int tokens = page.tokens;
  constexpr bool kInteger = integer_codes(FV);
  const int groups = kInteger ? layout.v_groups() : 1;
  float weight_sums[kArmMaxVGroups][NG];
  for (int grp = 0; grp < groups; ++grp) {
    for (int g = 0; g < NG; ++g) {
      float* w = s.weights[grp][g];
      float sum = 0.0f;
      if constexpr (kInteger) {
        const auto* bits = layout.at<std::uint16_t>(page.data, layout.v_scale);
        for (int t = 0; t < tokens; ++t) {
          w[t] = s.scores[g][t] * f16_to_f32(bits[t * groups + grp]);
          sum += w[t];
        }
      } else {
        const float scale = arm_raw_scale<FV>(layout, page.data, layout.v_scale);
        for (int t = 0; t < tokens; ++t) w[t] = s.scores[g][t] * scale;
      }
      weight_sums[grp][g] = sum;
    }
  }
  const float midpoint = kInteger ? v_code_midpoint(FV) : 0.0f;
  const std::uint8_t* rows = layout.at<std::uint8_t>(page.data, layout.v_data);
  const std::size_t row_bytes = layout.v_row_bytes();
  const std::size_t stride = SoftmaxState::stride(dim);
  for (int c = 0; c < dim; c += 8) {
    const int grp = kInteger ? c / layout.v_group : 0;  // v_group is a multiple of 8
    float32x4_t a[NG], b[NG];
    for (int g = 0; g < NG; ++g) a[g] = b[g] = vdupq_n_f32(0.0f);
    const std::uint8_t* row = rows;
    for (int t = 0; t < tokens; ++t, row += row_bytes) {
      const float32x4_t v0 = load_raw4<FV>(row, c, dim), v1 = load_raw4<FV>(row, c + 4, dim);
      for (int g = 0; g < NG; ++g) {
        const float w = s.weights[grp][g][t];
        a[g] = vfmaq_n_f32(a[g], v0, w);
        b[g] = vfmaq_n_f32(b[g], v1, w);
      }
    }
    for (int g = 0; g < NG; ++g) {
      float* out = states + g * stride + 2 + c;
      const float32x4_t shift = vdupq_n_f32(midpoint * weight_sums[grp][g]);
      vst1q_f32(out, vaddq_f32(vmulq_n_f32(vld1q_f32(out), rescale[g]), vsubq_f32(a[g], shift)));
      vst1q_f32(out + 4, vaddq_f32(vmulq_n_f32(vld1q_f32(out + 4), rescale[g]), vsubq_f32(b[g], shift)));
    }
  }
}

// The page's 7-bit V weights per group and head (int_dot.h's rule, the integers of
// decode_page_int_ref): p page-relative, its largest value exp(0) = 1.
template <int NG>
void quantize_weights_arm(const PageView& page, const float* p_sum, const float* page_scale, ArmScratch& s) {
  const PageLayout& layout = *page.layout;
  const int groups = layout.v_groups();
  const int tokens = page.tokens;
  const auto* bits = layout.at<std::uint16_t>(page.data, layout.v_scale);
  const float midpoint = v_code_midpoint(Format::Q4);
  float head_scale[NG], head_inverse[NG];
  for (int g = 0; g < NG; ++g) {
    head_scale[g] = weight_head_scale(p_sum[g], 1.0f, tokens);
    head_inverse[g] = weight_inverse(head_scale[g]);
  }
  for (int grp = 0; grp < groups; ++grp) {
    float max_vs = 0.0f;
    for (int t = 0; t < tokens; ++t) max_vs = std::max(max_vs, f16_to_f32(bits[t * groups + grp]));
    const float group_inverse = weight_inverse(max_vs);
    for (int g = 0; g < NG; ++g) {
      std::int8_t* w = s.w8[grp][g];
      std::int32_t sum = 0;
      for (int t = 0; t < tokens; ++t) {
        const float x = (s.scores[g][t] * head_inverse[g]) * (f16_to_f32(bits[t * groups + grp]) * group_inverse);
        w[t] = static_cast<std::int8_t>(std::lrint(x));
        sum += w[t];
      }
      for (int t = tokens; t < ((tokens + 3) & ~3); ++t) w[t] = 0;
      s.w_scale[grp][g] = max_vs * (head_scale[g] * page_scale[g]);
      s.w_shift[grp][g] = midpoint * static_cast<float>(sum);
    }
  }
}

// The integer V pass (SDOT): four tokens' codes of a channel share a 32-bit lane, times the four
// tokens' weights. Per 64-channel block and half of its 32 bytes, the low nibbles (channels
// j) and the high ones (j + 32) in turn.
template <int NG>
void values_int(const PageView& page, float* states, const float* rescale, const float* p_sum, const float* page_scale,
                ArmScratch& s) {
  quantize_weights_arm<NG>(page, p_sum, page_scale, s);
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  const int tokens = page.tokens;
  const std::uint8_t* rows = layout.at<std::uint8_t>(page.data, layout.v_data);
  const std::size_t row_bytes = layout.v_row_bytes();
  const std::size_t stride = SoftmaxState::stride(dim);
  const int full = tokens & ~3;
  alignas(16) std::uint8_t tail[4][32];  // the last rows of a page whose tokens are not a multiple of 4, zero-padded
  for (int base = 0; base < dim; base += 64) {
    for (int half = 0; half < 2; ++half) {
      const std::size_t offset = static_cast<std::size_t>(base / 2 + 16 * half);
      if (full < tokens) {
        std::memset(tail, 0, sizeof(tail));
        for (int t = full; t < tokens; ++t) std::memcpy(tail[t - full], rows + t * row_bytes + offset, 16);
      }
      for (int high = 0; high < 2; ++high) {
        const int c0 = base + 32 * high + 16 * half;  // channels c0..c0+15
        const int grp = c0 / layout.v_group;
        int32x4_t acc[NG][4];
        for (int g = 0; g < NG; ++g) {
          for (int i = 0; i < 4; ++i) acc[g][i] = vdupq_n_s32(0);
        }
        for (int t = 0; t < tokens; t += 4) {
          uint8x16_t r[4];
          for (int i = 0; i < 4; ++i) {
            r[i] = t < full ? vld1q_u8(rows + (t + i) * row_bytes + offset) : vld1q_u8(tail[i]);
          }
          // Byte j of row i to byte 4j + i: lane j of z[k] holds channel 4k + j of the four tokens.
          const uint8x16_t a = vzip1q_u8(r[0], r[1]), b = vzip2q_u8(r[0], r[1]);
          const uint8x16_t c = vzip1q_u8(r[2], r[3]), d = vzip2q_u8(r[2], r[3]);
          uint8x16_t z[4] = {vreinterpretq_u8_u16(vzip1q_u16(vreinterpretq_u16_u8(a), vreinterpretq_u16_u8(c))),
                             vreinterpretq_u8_u16(vzip2q_u16(vreinterpretq_u16_u8(a), vreinterpretq_u16_u8(c))),
                             vreinterpretq_u8_u16(vzip1q_u16(vreinterpretq_u16_u8(b), vreinterpretq_u16_u8(d))),
                             vreinterpretq_u8_u16(vzip2q_u16(vreinterpretq_u16_u8(b), vreinterpretq_u16_u8(d)))};
          for (int k = 0; k < 4; ++k) z[k] = high != 0 ? vshrq_n_u8(z[k], 4) : vandq_u8(z[k], vdupq_n_u8(0x0F));
          for (int g = 0; g < NG; ++g) {
            std::int32_t four;
            std::memcpy(&four, s.w8[grp][g] + t, sizeof(four));
            const int8x16_t w = vreinterpretq_s8_s32(vdupq_n_s32(four));
            for (int k = 0; k < 4; ++k) acc[g][k] = vdotq_s32(acc[g][k], vreinterpretq_s8_u8(z[k]), w);
          }
        }
        for (int g = 0; g < NG; ++g) {
          float* out = states + g * stride + 2 + c0;
          const float32x4_t shift = vdupq_n_f32(s.w_shift[grp][g]);
          for (int k = 0; k < 4; ++k) {
            const float32x4_t contribution = vmulq_n_f32(vsubq_f32(vcvtq_f32_s32(acc[g][k]), shift), s.w_scale[grp][g]);
            vst1q_f32(out + 4 * k, vfmaq_n_f32(contribution, vld1q_f32(out + 4 * k), rescale[g]));
          }
        }
      }
    }
  }
}

template <ArmDot D, Format FK, int NG>
void score_page(const PageView& page, const float* q, bool int_k, ArmScratch& s) {
  if constexpr (D != ArmDot::None && (FK == Format::Q4 || FK == Format::Q8)) {
    if (int_k) return score_int<D, FK, NG>(page, q, s);
  }
  score_float<FK, NG>(page, q, s);
}

template <ArmDot D, int NG>
void decode_chunk_arm(const PageView& page, const float* q, float* states, float* page_lse) {
  ArmScratch& s = arm_scratch();
  const PageLayout& layout = *page.layout;
  const IntDotPaths paths = int_dot_paths(layout, arm_isa(D));
  switch (layout.k_format) {
    case Format::F32: score_page<D, Format::F32, NG>(page, q, paths.k, s); break;
    case Format::F16: score_page<D, Format::F16, NG>(page, q, paths.k, s); break;
    case Format::FP8: score_page<D, Format::FP8, NG>(page, q, paths.k, s); break;
    case Format::Q8: score_page<D, Format::Q8, NG>(page, q, paths.k, s); break;
    case Format::Q4: score_page<D, Format::Q4, NG>(page, q, paths.k, s); break;
    case Format::Q2: score_page<D, Format::Q2, NG>(page, q, paths.k, s); break;
  }
  float rescale[NG], p_sum[NG], page_scale[NG];
  if constexpr (D != ArmDot::None) {
    if (paths.v) {
      softmax_arm<NG, true>(page, states, layout.head_dim, s, rescale, page_lse, p_sum, page_scale);
      values_int<NG>(page, states, rescale, p_sum, page_scale, s);
      return;
    }
  }
  softmax_arm<NG, false>(page, states, layout.head_dim, s, rescale, page_lse, p_sum, page_scale);
  switch (layout.v_format) {
    case Format::F32: values_float<Format::F32, NG>(page, states, rescale, s); break;
    case Format::F16: values_float<Format::F16, NG>(page, states, rescale, s); break;
    case Format::FP8: values_float<Format::FP8, NG>(page, states, rescale, s); break;
    case Format::Q8: values_float<Format::Q8, NG>(page, states, rescale, s); break;
    case Format::Q4: values_float<Format::Q4, NG>(page, states, rescale, s); break;
    case Format::Q2: values_float<Format::Q2, NG>(page, states, rescale, s); break;
  }
}

// Folds one page into the states of `group` q heads, chunks of up to four heads.
template <ArmDot D>
void decode_page_arm(const PageView& page, const float* q, int group, float* states, float* page_lse) {
  if (page.tokens == 0) {
    if (page_lse != nullptr) std::fill(page_lse, page_lse + group, -INFINITY);
    return;
  }
  const int dim = page.layout->head_dim;
  for (int g = 0; g < group;) {
    const int heads = std::min(kArmChunkHeads, group - g);
    const float* qg = q + static_cast<std::size_t>(g) * dim;
    float* sg = states + g * SoftmaxState::stride(dim);
    float* lse = page_lse != nullptr ? page_lse + g : nullptr;
    switch (heads) {
      case 4: decode_chunk_arm<D, 4>(page, qg, sg, lse); break;
      case 3: decode_chunk_arm<D, 3>(page, qg, sg, lse); break;
      case 2: decode_chunk_arm<D, 2>(page, qg, sg, lse); break;
      default: decode_chunk_arm<D, 1>(page, qg, sg, lse); break;
    }
    g += heads;
  }
}

}  // namespace
}  // namespace kv
