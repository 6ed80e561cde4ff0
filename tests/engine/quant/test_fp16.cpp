#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <random>

#include "quant/fp16.h"

using namespace kv;

TEST_CASE("Every finite half converts to float and back exactly", "[quant]") {
  for (std::uint32_t bits = 0; bits < 0x10000u; ++bits) {
    const auto h = static_cast<std::uint16_t>(bits);
    if ((h & 0x7C00u) == 0x7C00u) continue;  // Inf/NaN
    REQUIRE(f32_to_f16(f16_to_f32(h)) == h);
  }
}

TEST_CASE("Float to half rounds to nearest, ties to even", "[quant]") {
  CHECK(f16_to_f32(f32_to_f16(1.0f + 1.0f / 2048.0f)) == 1.0f);                 // tie -> even (down)
  CHECK(f16_to_f32(f32_to_f16(1.0f + 3.0f / 2048.0f)) == 1.0f + 2.0f / 1024.0f);  // tie -> even (up)
  CHECK(f16_to_f32(f32_to_f16(65504.0f)) == 65504.0f);
  CHECK(std::isinf(f16_to_f32(f32_to_f16(70000.0f))));
  CHECK(f16_to_f32(f32_to_f16(5.9604645e-8f)) == 5.9604645e-8f);  // smallest subnormal
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1000.0f, 1000.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = dist(rng);
    const float y = f16_to_f32(f32_to_f16(x));
    REQUIRE(std::fabs(x - y) <= std::fabs(x) * (1.0f / 2048.0f));
  }
}

TEST_CASE("Directed half rounding keeps bounds true", "[quant]") {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 30.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = dist(rng);
    REQUIRE(f16_to_f32(f32_to_f16_down(x)) <= x);
    REQUIRE(f16_to_f32(f32_to_f16_up(x)) >= x);
    REQUIRE(std::fabs(f16_to_f32(f32_to_f16_up(x)) - x) <= std::fabs(x) / 512.0f + 1e-7f);
  }
  CHECK(f16_to_f32(f32_to_f16_down(0.0f)) == 0.0f);
}

TEST_CASE("FP8 E4M3: every code decodes and re-encodes to itself", "[quant]") {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F) continue;  // NaN codes are never produced
    const float value = fp8_e4m3_to_f32(static_cast<std::uint8_t>(code));
    const std::uint8_t back = f32_to_fp8_e4m3(value);
    if ((code & 0x7F) == 0) {
      REQUIRE((back & 0x7F) == 0);
    } else {
      REQUIRE(back == code);
    }
  }
  CHECK(fp8_e4m3_to_f32(0x7E) == 448.0f);
  CHECK(fp8_e4m3_to_f32(0x01) == std::ldexp(1.0f, -9));  // smallest subnormal
  CHECK(fp8_e4m3_to_f32(0x08) == std::ldexp(1.0f, -6));  // smallest normal
}

TEST_CASE("FP8 E4M3 encoding picks the nearest value and saturates", "[quant]") {
  CHECK(f32_to_fp8_e4m3(1000.0f) == 0x7E);
  CHECK(f32_to_fp8_e4m3(-1000.0f) == 0xFE);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> dist(-448.0f, 448.0f);
  for (int i = 0; i < 20000; ++i) {
    const float x = dist(rng) * (i % 2 == 0 ? 1.0f : 0.01f);
    const float y = fp8_e4m3_to_f32(f32_to_fp8_e4m3(x));
    // No representable value is closer.
    float best = INFINITY;
    for (int code = 0; code < 256; ++code) {
      if ((code & 0x7F) == 0x7F) continue;
      best = std::min(best, std::fabs(fp8_e4m3_to_f32(static_cast<std::uint8_t>(code)) - x));
    }
    REQUIRE(std::fabs(y - x) == best);
  }
}
