// Quest's page bound on NEON (page_kernels.h): the f16 bounds converted once per four channels
// for every q head; max(q * lo, q * hi) is q * lo where q < 0 and q * hi elsewhere (lo <= hi).
#pragma once

#include <arm_neon.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace kv {
namespace {

inline float32x4_t load_half4(const std::uint16_t* p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

template <int NG>
float page_bound_heads_neon(const std::uint16_t* lo, const std::uint16_t* hi, const float* q, int dim) {
  float32x4_t acc[NG];
  for (int g = 0; g < NG; ++g) acc[g] = vdupq_n_f32(0.0f);
  for (int c = 0; c < dim; c += 4) {
    const float32x4_t l = load_half4(lo + c), h = load_half4(hi + c);
    for (int g = 0; g < NG; ++g) {
      const float32x4_t qv = vld1q_f32(q + g * dim + c);
      acc[g] = vfmaq_f32(acc[g], qv, vbslq_f32(vcltzq_f32(qv), l, h));
    }
  }
  float best = -INFINITY;
  for (int g = 0; g < NG; ++g) best = std::max(best, vaddvq_f32(acc[g]));
  return best;
}

// bounds: [count][key_min, key_max][dim] f16.
inline void page_bounds_neon(const std::uint16_t* bounds, std::size_t count, int dim, const float* q, int group, float* out) {
  const std::size_t stride = 2 * static_cast<std::size_t>(dim);
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint16_t* lo = bounds + i * stride;
    const std::uint16_t* hi = lo + dim;
    float best = -INFINITY;
    for (int g0 = 0; g0 < group; g0 += 4) {
      const float* qg = q + static_cast<std::size_t>(g0) * dim;
      const int heads = std::min(4, group - g0);
      const float bound = heads == 4   ? page_bound_heads_neon<4>(lo, hi, qg, dim)
                          : heads == 3 ? page_bound_heads_neon<3>(lo, hi, qg, dim)
                          : heads == 2 ? page_bound_heads_neon<2>(lo, hi, qg, dim)
                                       : page_bound_heads_neon<1>(lo, hi, qg, dim);
      best = std::max(best, bound);
    }
    out[i] = best;
  }
}

}  // namespace
}  // namespace kv
