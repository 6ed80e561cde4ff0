// NEON building blocks of the Arm kernels: the exp polynomial and the loads that turn a row's
// payload into floats. Advanced SIMD is part of every aarch64 CPU, so these compile into each
// Arm translation unit; everything has internal linkage (a copy built with dotprod or i8mm
// flags must not serve the plain NEON path).
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

#include "quant/format.h"

namespace kv {
namespace {

// e^x for x <= 0, the same Cephes single-precision polynomial as the x86 kernels (about 2 ulp);
// inputs are clamped to [-87, 0] so the result is never Inf or NaN.
inline float32x4_t exp_f32x4(float32x4_t x) {
  x = vminq_f32(vmaxq_f32(x, vdupq_n_f32(-87.0f)), vdupq_n_f32(0.0f));
  const float32x4_t n = vrndnq_f32(vmulq_n_f32(x, 1.44269504088896341f));
  float32x4_t r = vfmsq_f32(x, n, vdupq_n_f32(0.693359375f));
  r = vfmsq_f32(r, n, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t p = vdupq_n_f32(1.9875691500e-4f);
  p = vfmaq_f32(vdupq_n_f32(1.3981999507e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(8.3334519073e-3f), p, r);
  p = vfmaq_f32(vdupq_n_f32(4.1665795894e-2f), p, r);
  p = vfmaq_f32(vdupq_n_f32(1.6666665459e-1f), p, r);
  p = vfmaq_f32(vdupq_n_f32(5.0000001201e-1f), p, r);
  p = vfmaq_f32(vaddq_f32(r, vdupq_n_f32(1.0f)), p, vmulq_f32(r, r));
  const int32x4_t exponent = vshlq_n_s32(vaddq_s32(vcvtnq_s32_f32(n), vdupq_n_s32(127)), 23);
  return vmulq_f32(p, vreinterpretq_f32_s32(exponent));
}

// Four bytes at p, widened to 32-bit lanes.
inline uint32x4_t load4_u8(const std::uint8_t* p) {
  std::uint32_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return vmovl_u16(vget_low_u16(vmovl_u8(vreinterpret_u8_u32(vdup_n_u32(bits)))));
}

// Four payload values of channels c..c+3 of a row of `dim` channels as floats, before the
// format's scale (page_layout.h for packing; fp8 through the E4M3 -> half identity of fp16.h,
// scale 2^8 folded by the caller). c is a multiple of 4.
template <Format F>
inline float32x4_t load_raw4(const std::uint8_t* row, int c, int dim) {
  if constexpr (F == Format::F32) {
    return vld1q_f32(reinterpret_cast<const float*>(row) + c);
  } else if constexpr (F == Format::F16) {
    std::uint16_t bits[4];
    std::memcpy(bits, row + 2 * c, sizeof(bits));
    return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(bits)));
  } else if constexpr (F == Format::FP8) {
    const uint32x4_t b = load4_u8(row + c);
    const uint32x4_t half = vorrq_u32(vshlq_n_u32(vandq_u32(b, vdupq_n_u32(0x80)), 8), vshlq_n_u32(vandq_u32(b, vdupq_n_u32(0x7F)), 7));
    return vcvt_f32_f16(vreinterpret_f16_u16(vmovn_u32(half)));
  } else if constexpr (F == Format::Q8) {
    return vcvtq_f32_u32(load4_u8(row + c));
  } else if constexpr (F == Format::Q4) {
    const int base = c & ~63;
    if (base + 64 <= dim) {  // a full block: one nibble of each of four bytes (codes.h)
      const int shift = (c & 32) != 0 ? 4 : 0;
      return vcvtq_f32_u32(vandq_u32(vshlq_u32(load4_u8(row + base / 2 + (c & 31)), vdupq_n_s32(-shift)), vdupq_n_u32(0x0F)));
    }
    std::uint16_t bits;  // two bytes, channels c..c+3 from the low nibble up
    std::memcpy(&bits, row + c / 2, sizeof(bits));
    const int32x4_t shifts = {0, -4, -8, -12};
    return vcvtq_f32_u32(vandq_u32(vshlq_u32(vdupq_n_u32(bits), shifts), vdupq_n_u32(0x0F)));
  } else {
    const int32x4_t shifts = {0, -2, -4, -6};
    return vcvtq_f32_u32(vandq_u32(vshlq_u32(vdupq_n_u32(row[c / 4]), shifts), vdupq_n_u32(0x03)));
  }
}

// 4-lane traits for the kernels written once for every ISA (prefill_tile_impl.h,
// dequantize_simd_impl.h).
struct V4 {
  using F = float32x4_t;
  static constexpr int kWidth = 4;
  static F zero() { return vdupq_n_f32(0.0f); }
  static F load(const float* p) { return vld1q_f32(p); }
  static void store(float* p, F v) { vst1q_f32(p, v); }
  static F set1(float x) { return vdupq_n_f32(x); }
  static F fmadd(F a, F b, F c) { return vfmaq_f32(c, a, b); }
  static F mul(F a, F b) { return vmulq_f32(a, b); }
  static F add(F a, F b) { return vaddq_f32(a, b); }
  static F sub(F a, F b) { return vsubq_f32(a, b); }
  static F max(F a, F b) { return vmaxq_f32(a, b); }
  static F exp(F x) { return exp_f32x4(x); }
  template <Format Fmt>
  static F load_raw(const std::uint8_t* row, int c, int dim) { return load_raw4<Fmt>(row, c, dim); }
};

}  // namespace
}  // namespace kv
