#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "quant/codes.h"
#include "quant/fp16.h"
#include "quant/quantizer.h"
#include "test_support.h"

using namespace kv;

namespace {

struct RoundTrip {
  PageLayout layout;
  std::vector<std::byte> page;
  std::vector<float> k, v, k_hat, v_hat;
};

RoundTrip round_trip(Format kf, Format vf, int page_tokens, int dim, int tokens, int v_group, std::uint32_t seed) {
  RoundTrip r;
  r.layout = PageLayout::make({page_tokens, dim, kf, vf, v_group, false});
  r.page.resize(r.layout.bytes);
  r.k = kvtest::random_keys(tokens, 1, dim, seed);
  r.v = kvtest::random_values(static_cast<std::size_t>(tokens) * dim, seed + 1);
  quantize_page(r.layout, r.k.data(), r.v.data(), tokens, r.page.data(), nullptr);
  r.k_hat.resize(r.k.size());
  r.v_hat.resize(r.v.size());
  dequantize_page_ref({&r.layout, r.page.data(), tokens}, r.k_hat.data(), r.v_hat.data());
  return r;
}

// The bound of each format, in terms of the stored scale (see quantizer.h).
float k_bound(const RoundTrip& r, int t, int c) {
  const PageLayout& L = r.layout;
  const float x = r.k[static_cast<std::size_t>(t * L.head_dim + c)];
  switch (L.k_format) {
    case Format::F32: return 0.0f;
    case Format::F16: return std::fabs(x) / 2048.0f + 3e-8f;
    case Format::FP8: {
      const float scale = *L.at<float>(r.page.data(), L.k_scale);
      return std::fabs(x) / 16.0f + scale * std::ldexp(1.0f, -10) + 1e-6f * std::fabs(x);
    }
    default: {
      const float scale = L.at<float>(r.page.data(), L.k_scale)[c];
      return scale * 0.5f * (1.0f + 1e-5f) + 1e-6f * std::fabs(x);
    }
  }
}

float v_bound(const RoundTrip& r, int t, int c) {
  const PageLayout& L = r.layout;
  const float x = r.v[static_cast<std::size_t>(t * L.head_dim + c)];
  switch (L.v_format) {
    case Format::F32: return 0.0f;
    case Format::F16: return std::fabs(x) / 2048.0f + 3e-8f;
    case Format::FP8: {
      const float scale = *L.at<float>(r.page.data(), L.v_scale);
      return std::fabs(x) / 16.0f + scale * std::ldexp(1.0f, -10) + 1e-6f * std::fabs(x);
    }
    default: {
      const float scale = f16_to_f32(L.at<std::uint16_t>(r.page.data(), L.v_scale)[t * L.v_groups() + c / L.v_group]);
      return scale * 0.5f * (1.0f + 1e-5f) + 1e-6f * std::fabs(x);
    }
  }
}

}  // namespace

TEST_CASE("Round-trip error stays within each format's bound", "[quant]") {
  std::uint32_t seed = 1;
  for (Format f : kAllFormats) {
    for (int page_tokens : {16, 64, 256}) {
      for (int dim : {8, 32, 72, 128, 256}) {
        for (int v_group : {8, 16, 24, 32, 48, 64, 96, 128}) {
          if (dim % std::min(v_group, dim) != 0) continue;
          const int tokens = page_tokens - (seed % 3 == 0 ? 5 : 0);  // some partial pages
          CAPTURE(format_name(f), page_tokens, dim, v_group, tokens);
          const RoundTrip r = round_trip(f, f, page_tokens, dim, tokens, v_group, seed++);
          for (int t = 0; t < tokens; ++t) {
            for (int c = 0; c < dim; ++c) {
              const auto i = static_cast<std::size_t>(t * dim + c);
              REQUIRE(std::fabs(r.k_hat[i] - r.k[i]) <= k_bound(r, t, c));
              REQUIRE(std::fabs(r.v_hat[i] - r.v[i]) <= v_bound(r, t, c));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("q4 pairs channel j with j + 32 in full blocks of 64, 2k with 2k + 1 after them", "[quant]") {
  for (int dim : {8, 24, 64, 96, 128, 200}) {
    CAPTURE(dim);
    std::vector<std::uint8_t> row(static_cast<std::size_t>(dim / 2), 0);
    for (int c = 0; c < dim; ++c) store_code(row.data(), c, (c * 7 + 3) % 16, Format::Q4, dim);
    for (int c = 0; c < dim; ++c) REQUIRE(load_code(row.data(), c, Format::Q4, dim) == (c * 7 + 3) % 16);
    const int full = dim / 64 * 64;
    for (int base = 0; base < full; base += 64) {
      for (int j = 0; j < 32; ++j) {
        REQUIRE((row[static_cast<std::size_t>(base / 2 + j)] & 0x0F) == ((base + j) * 7 + 3) % 16);
        REQUIRE(row[static_cast<std::size_t>(base / 2 + j)] >> 4 == ((base + 32 + j) * 7 + 3) % 16);
      }
    }
    for (int c = full; c < dim; c += 2) {
      REQUIRE(row[static_cast<std::size_t>(c / 2)] == (((c * 7 + 3) % 16) | ((((c + 1) * 7 + 3) % 16) << 4)));
    }
  }
}

TEST_CASE("Integer formats use their whole code range", "[quant]") {
  for (Format f : {Format::Q8, Format::Q4, Format::Q2}) {
    const RoundTrip r = round_trip(f, f, 64, 64, 64, 32, 99);
    int lowest = 1 << 10, highest = -1;
    for (int t = 0; t < 64; ++t) {
      const int code = load_code(r.layout.k_row(r.page.data(), t), 0, f, 64);
      lowest = std::min(lowest, code);
      highest = std::max(highest, code);
    }
    CAPTURE(format_name(f));
    CHECK(lowest == 0);
    CHECK(highest == format_max_code(f));
  }
}

TEST_CASE("K offsets sit outside the code range when the range excludes 0", "[quant]") {
  // Channel values in [100, 101]: a clamped integer zero point would wreck this; a float
  // offset keeps q8 error at range/255/2.
  const int dim = 8, tokens = 32;
  const PageLayout layout = PageLayout::make({32, dim, Format::Q8, Format::Q8, 32, false});
  std::vector<std::byte> page(layout.bytes);
  std::vector<float> k(tokens * dim), v(tokens * dim, 0.5f);
  for (int t = 0; t < tokens; ++t)
    for (int c = 0; c < dim; ++c) k[t * dim + c] = 100.0f + static_cast<float>(t) / (tokens - 1);
  quantize_page(layout, k.data(), v.data(), tokens, page.data(), nullptr);
  std::vector<float> kh(k.size()), vh(v.size());
  dequantize_page_ref({&layout, page.data(), tokens}, kh.data(), vh.data());
  CHECK(kvtest::max_abs_diff(kh, k) <= 1.0f / 255.0f / 2.0f * 1.01f + 1e-5f);
}

TEST_CASE("Constant channels and all-zero pages quantize exactly", "[quant]") {
  for (Format f : kAllFormats) {
    const int dim = 16, tokens = 16;
    const PageLayout layout = PageLayout::make({16, dim, f, f, 32, false});
    std::vector<std::byte> page(layout.bytes);
    std::vector<float> k(tokens * dim, 0.0f), v(tokens * dim, 0.0f);
    for (int t = 0; t < tokens; ++t) k[t * dim + 3] = 2.5f;
    quantize_page(layout, k.data(), v.data(), tokens, page.data(), nullptr);
    std::vector<float> kh(k.size()), vh(v.size());
    dequantize_page_ref({&layout, page.data(), tokens}, kh.data(), vh.data());
    CAPTURE(format_name(f));
    // fp8 stores 2.5 as 448 * (2.5 / 448), exact to a float rounding.
    CHECK(kvtest::max_abs_diff(kh, k) <= (f == Format::FP8 ? 1e-6f : 0.0f));
    CHECK(kvtest::max_abs_diff(vh, v) == 0.0f);
  }
}

TEST_CASE("Quest key bounds hold every stored key", "[quant]") {
  std::uint32_t seed = 500;
  for (Format f : kAllFormats) {
    for (int dim : {8, 64, 128}) {
      const RoundTrip r = round_trip(f, Format::F16, 64, dim, 61, 32, seed++);
      const auto* lo = r.layout.at<std::uint16_t>(r.page.data(), r.layout.key_min);
      const auto* hi = r.layout.at<std::uint16_t>(r.page.data(), r.layout.key_max);
      for (int t = 0; t < 61; ++t) {
        for (int c = 0; c < dim; ++c) {
          const float key = r.k_hat[static_cast<std::size_t>(t * dim + c)];
          REQUIRE(f16_to_f32(lo[c]) <= key);
          REQUIRE(f16_to_f32(hi[c]) >= key);
        }
      }
    }
  }
}

TEST_CASE("Quantization records raw page statistics", "[quant]") {
  const int dim = 32, tokens = 16;
  const PageLayout layout = PageLayout::make({16, dim, Format::Q4, Format::Q4, 32, false});
  std::vector<std::byte> page(layout.bytes);
  const auto k = kvtest::random_keys(tokens, 1, dim, 5);
  const auto v = kvtest::random_values(tokens * dim, 6);
  PageStats stats;
  quantize_page(layout, k.data(), v.data(), tokens, page.data(), &stats);
  REQUIRE(stats.k_min.size() == dim);
  REQUIRE(stats.v_group_absmax.size() == 1);
  float vmax = 0.0f;
  for (float x : v) vmax = std::max(vmax, std::fabs(x));
  CHECK(stats.v_group_absmax[0] == vmax);
  for (int c = 0; c < dim; ++c) {
    float lo = INFINITY;
    for (int t = 0; t < tokens; ++t) lo = std::min(lo, k[t * dim + c]);
    CHECK(stats.k_min[c] == lo);
  }
}
