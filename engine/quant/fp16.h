// IEEE binary16 and FP8-E4M3 conversions, scalar and exact (round to nearest even). The SIMD
// kernels use F16C for half and the identity below for E4M3; tests compare them with these.
#pragma once

#include <cstdint>

namespace kv {

std::uint16_t f32_to_f16(float value);
float f16_to_f32(std::uint16_t bits);

// Round a float to the nearest half that is <= value (or >= value): used where a stored
// bound must stay a true bound (Quest min/max, zero points).
std::uint16_t f32_to_f16_down(float value);
std::uint16_t f32_to_f16_up(float value);

// FP8 E4M3 ("fn" variant: no infinities, S.1111.111 is NaN, largest finite 448).
inline constexpr float kFp8E4M3Max = 448.0f;
// Saturates to +-448; NaN input is the caller's to reject (the quantizer never passes one).
std::uint8_t f32_to_fp8_e4m3(float value);
// E4M3 bits b map to the half whose bits are ((b & 0x80) << 8) | ((b & 0x7F) << 7), scaled by
// 2^8: both exponent biases (7 and 15) differ by 8 and subnormals line up. The SIMD kernels
// rely on this identity.
float fp8_e4m3_to_f32(std::uint8_t bits);

}  // namespace kv
