// Integer dot products of the SIMD decode kernels: when they apply and how they quantize.
// The kernels (arch/x86/decode_int_impl.h, arch/arm/decode_arm_impl.h) and their reference twin
// (decode_page_int_ref) share these rules, so the reference reproduces the kernel's integers
// exactly. Which formats take them depends on the path (int_dot_paths):
//   x86 (AVX2, AVX-512): K q4 (head_dim a multiple of 64, at most 256), V q4 (below).
//   Arm dotprod / i8mm: K q4 (head_dim a multiple of 64) and q8 (a multiple of 16, a 14-bit
//   query: query_code_max): SDOT or USMMLA accumulate in int32, which holds a row of 512
//   products of 255 * 16256; V q4.
//   scalar, Arm NEON: none.
//
// K: per page and q head the folded query
// q' = q * k_scale is quantized to int8, q8[c] = round(q'[c] * 127 / max|q'|), and
// q'.code = (max|q'| / 127) * sum_c q8[c] * code[c] + q.k_zero (127: query_code_max).
// vpmaddubsw multiplies the unsigned 4-bit codes with the signed query bytes; a whole row sums
// in int16 (at most 8 products of 2 * 15 * 127 = 30480 for head_dim 256; the Arm instructions
// sum in int32).
//
// V (q4 codes, head_dim a multiple of 64, V groups a multiple of 32 channels - 32, 64, 128, a
// whole head - at most 8 groups): per page, q head and
// V group the weights w[t] = p[t] * v_scale[t][g] (p: the softmax numerators relative to the
// page's own maximum, exp(score - page max), so they and their integers do not depend on the
// running maximum; exp(page max - running max) goes into the page's scale) are quantized to
// 0..127 with the scale s = m * c, m = max_t v_scale[t][g] and c = max(sum_t p / L, max_t p / 127):
// w8[t] = round((p[t] * (1 / c)) * (v_scale[t][g] * (1 / m))), so that sum_t w8[t] <= L +
// tokens / 2 and sum_t w8[t] * 15 stays inside int16 (L below). The page's contribution to
// channel c is s * (sum_t w8[t] * code[t][c] - midpoint * sum_t w8[t]).
// Error against the float path: |q8 - q' * 127 / max|q'|| <= 1/2 per channel and |w8 - w / s|
// <= 1/2 per token (tests/engine/attention/test_page_kernels.cpp turns these into bounds).
#pragma once

#include <cmath>

#include "quant/page_layout.h"
#include "runtime/isa.h"

namespace kv {

struct IntDotPaths {
  bool k = false;  // q . k with an int8 query against q4 codes
  bool v = false;  // p . v with 7-bit weights against q4 codes
};

// V groups the integer value pass holds weights for (its per-thread scratch).
inline constexpr int kMaxIntVGroups = 8;

// The integer paths the kernels of `isa` take for a page layout.
inline IntDotPaths int_dot_paths(const PageLayout& layout, Isa isa) {
  const bool blocks = layout.head_dim % 64 == 0;
  // V groups of a multiple of 32 channels: the kernels' 32-channel blocks (16 on Arm) each lie
  // in one group (other groups, any multiple of 8 that divides the head, take the float value
  // pass).
  const bool int_v = layout.v_format == Format::Q4 && blocks && layout.v_group % 32 == 0 &&
                     layout.v_groups() <= kMaxIntVGroups;
  switch (isa) {
    case Isa::Avx2:
    case Isa::Avx512: return {layout.k_format == Format::Q4 && blocks && layout.head_dim <= 256, int_v};
    case Isa::Dotprod:
    case Isa::I8mm:
      return {(layout.k_format == Format::Q4 && blocks) || (layout.k_format == Format::Q8 && layout.head_dim % 16 == 0), int_v};
    default: return {};
  }
}

inline constexpr float kQueryCodeMax = 127.0f;

// The largest query code of the K rule for a K format: 127 (one int8 a channel) for q4; for q8
// (Arm only) 127 * 128, the query held as two signed bytes q = 128 * hi + lo (lo in -64..63),
// two dot products a channel: an int8 query would round about as much as q8 rounds the keys
// and double the format's error, the 14-bit one adds 1/128 of that.
inline float query_code_max(Format k_format) { return k_format == Format::Q8 ? 127.0f * 128.0f : kQueryCodeMax; }
inline constexpr float kWeightCodeMax = 127.0f;

// L: the weight sum budget of a page of `tokens` tokens (2184 * 15 = 32760 < 32767, less the
// worst-case rounding of tokens / 2 and a margin of 8 for float rounding in the sums).
inline int weight_sum_limit(int tokens) { return 2176 - (tokens + 1) / 2; }

// The head factor c of the weight scale of one q head of a page; 0 when it carries no weight.
inline float weight_head_scale(float p_sum, float p_max, int tokens) {
  const float a = p_sum / static_cast<float>(weight_sum_limit(tokens));
  const float b = p_max / kWeightCodeMax;
  return a > b ? a : b;
}

// 1 / x, or 0 where x is 0 or so small that 1 / x overflows (a page whose weights vanish
// against the running maximum contributes nothing).
inline float weight_inverse(float scale) {
  const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
  return std::isfinite(inv) ? inv : 0.0f;
}

}  // namespace kv
