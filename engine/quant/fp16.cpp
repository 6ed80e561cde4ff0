#include "quant/fp16.h"

#include <bit>
#include <cmath>
#include <limits>

namespace kv {

std::uint16_t f32_to_f16(float value) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t abs = x & 0x7FFFFFFFu;
  if (abs >= 0x7F800000u) {  // Inf or NaN
    return static_cast<std::uint16_t>(sign | 0x7C00u | (abs > 0x7F800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // rounds to Inf
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): value = m * 2^-24, round to nearest even.
    const float magnitude = std::bit_cast<float>(abs);
    const float scaled = magnitude * 16777216.0f;  // 2^24, exact
    const auto m = static_cast<std::uint32_t>(std::nearbyint(scaled));
    return static_cast<std::uint16_t>(sign | m);
  }
  // Normal: rebias exponent, round mantissa from 23 to 10 bits, ties to even.
  std::uint32_t rounded = abs + 0xFFFu + ((abs >> 13) & 1u);
  rounded -= (127u - 15u) << 23;
  return static_cast<std::uint16_t>(sign | (rounded >> 13));
}

float f16_to_f32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
  const std::uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) * (1.0f / 16777216.0f);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) {
    return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

namespace {
std::uint16_t next_half(std::uint16_t bits, bool toward_positive) {
  // Step one representable half toward +inf or -inf (finite inputs only).
  const bool negative = (bits & 0x8000u) != 0;
  if ((bits & 0x7FFFu) == 0) return toward_positive ? 0x0001u : 0x8001u;
  const bool grow = negative != toward_positive;  // magnitude grows when moving away from 0
  return static_cast<std::uint16_t>(grow ? bits + 1 : bits - 1);
}
}  // namespace

std::uint16_t f32_to_f16_down(float value) {
  std::uint16_t bits = f32_to_f16(value);
  if (f16_to_f32(bits) > value) bits = next_half(bits, false);
  return bits;
}

std::uint16_t f32_to_f16_up(float value) {
  std::uint16_t bits = f32_to_f16(value);
  if (f16_to_f32(bits) < value) bits = next_half(bits, true);
  return bits;
}

std::uint8_t f32_to_fp8_e4m3(float value) {
  // Direct rounding to nearest, ties to even, saturating at 448 (no double rounding).
  const std::uint8_t sign = std::signbit(value) ? 0x80u : 0x00u;
  const float magnitude = std::fabs(value);
  if (!(magnitude < kFp8E4M3Max)) return static_cast<std::uint8_t>(sign | 0x7Eu);
  constexpr float kMinNormal = 0.015625f;  // 2^-6
  if (magnitude < kMinNormal) {
    // Subnormal: multiples of 2^-9; 8 * 2^-9 rounds up into the smallest normal, code 0x08.
    const auto steps = static_cast<std::uint32_t>(std::nearbyint(magnitude * 512.0f));
    return static_cast<std::uint8_t>(sign | steps);
  }
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(magnitude);
  const std::uint32_t rounded = bits + 0x7FFFFu + ((bits >> 20) & 1u);  // keep 3 mantissa bits
  const std::uint32_t code = (rounded >> 20) - ((127u - 7u) << 3);       // rebias the exponent
  return static_cast<std::uint8_t>(sign | (code > 0x7Eu ? 0x7Eu : code));
}

float fp8_e4m3_to_f32(std::uint8_t bits) {
  const auto half = static_cast<std::uint16_t>(((bits & 0x80u) << 8) | ((bits & 0x7Fu) << 7));
  return f16_to_f32(half) * 256.0f;
}

}  // namespace kv
