#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "attention/int_dot.h"
#include "attention/page_kernels.h"
#include "attention/softmax_state.h"
#include "quant/quantizer.h"
#include "test_support.h"

using namespace kv;

namespace {

struct TestPage {
  PageLayout layout;
  std::vector<std::byte> bytes;
  PageView view() const { return {&layout, bytes.data(), tokens}; }
  int tokens = 0;
};

TestPage make_page(Format kf, Format vf, int page_tokens, int dim, int tokens, std::uint32_t seed, int v_group = 32) {
  TestPage page;
  page.layout = PageLayout::make({page_tokens, dim, kf, vf, v_group, false});
  page.bytes.resize(page.layout.bytes);
  page.tokens = tokens;
  const auto k = kvtest::random_keys(tokens, 1, dim, seed);
  const auto v = kvtest::random_values(static_cast<std::size_t>(tokens) * dim, seed + 1);
  quantize_page(page.layout, k.data(), v.data(), tokens, page.bytes.data(), nullptr);
  // The rows a partial page does not use hold garbage (large finite f16 scales, all-ones codes):
  // kernels must not depend on them.
  const PageLayout& l = page.layout;
  const auto fill = [&](std::size_t offset, std::size_t row_bytes, std::uint8_t byte) {
    std::fill(page.bytes.begin() + static_cast<std::ptrdiff_t>(offset + tokens * row_bytes),
              page.bytes.begin() + static_cast<std::ptrdiff_t>(offset + page_tokens * row_bytes), std::byte{byte});
  };
  fill(l.k_data, l.k_row_bytes(), 0xFF);
  fill(l.v_data, l.v_row_bytes(), 0xFF);
  if (vf == Format::Q8 || vf == Format::Q4 || vf == Format::Q2) fill(l.v_scale, l.v_groups() * sizeof(std::uint16_t), 0x7B);
  return page;
}

// `count` empty softmax states of head_dim `dim`, one after the other.
std::vector<float> empty_states(int count, int dim) {
  const std::size_t stride = SoftmaxState::stride(dim);
  std::vector<float> states(static_cast<std::size_t>(count) * stride);
  for (int i = 0; i < count; ++i) SoftmaxState(states.data() + i * stride, dim).reset();
  return states;
}

std::vector<float> queries(int count, int dim, std::uint32_t seed) {
  auto q = kvtest::random_values(static_cast<std::size_t>(count) * dim, seed);
  for (float& x : q) x /= std::sqrt(static_cast<float>(dim));  // the softmax scale
  return q;
}

// Compares two sets of states by log-sum-exp and normalised output; `slack` (per state, may be
// empty) widens the output bound by that much.
void require_states_close(const std::vector<float>& got, const std::vector<float>& want, int count, int dim,
                          const std::vector<float>& slack = {}) {
  const std::size_t stride = SoftmaxState::stride(dim);
  for (int i = 0; i < count; ++i) {
    SoftmaxState g(const_cast<float*>(got.data()) + i * stride, dim);
    SoftmaxState w(const_cast<float*>(want.data()) + i * stride, dim);
    REQUIRE(g.empty() == w.empty());
    if (w.empty()) continue;
    REQUIRE(g.max() + std::log(g.sum()) == Approx(w.max() + std::log(w.sum())).margin(1e-4));
    std::vector<float> go(static_cast<std::size_t>(dim)), wo(static_cast<std::size_t>(dim));
    g.write_output(go.data());
    w.write_output(wo.data());
    const float extra = slack.empty() ? 0.0f : slack[static_cast<std::size_t>(i)];
    REQUIRE(kvtest::max_abs_diff(go, wo) <= 1e-4f * std::max(1.0f, kvtest::max_abs_diff(wo, std::vector<float>(wo.size(), 0.0f))) + extra);
  }
}

std::vector<std::pair<Format, Format>> format_pairs() {
  std::vector<std::pair<Format, Format>> pairs;
  for (Format f : kAllFormats) pairs.emplace_back(f, f);
  pairs.emplace_back(Format::Q8, Format::Q4);
  pairs.emplace_back(Format::Q4, Format::Q2);
  pairs.emplace_back(Format::F16, Format::Q4);
  pairs.emplace_back(Format::FP8, Format::Q8);
  pairs.emplace_back(Format::Q2, Format::F32);
  return pairs;
}

}  // namespace

TEST_CASE("Every decode kernel matches the reference on random shapes", "[attention]") {
  std::uint32_t seed = 1000;
  int integer_cases = 0;
  for (Isa isa : supported_isas()) {
    const PageKernels& kernels = page_kernels(isa);
    for (auto [kf, vf] : format_pairs()) {
      for (int dim : {8, 24, 64, 128, 256}) {
        // 33: a full page of odd length, whose last token the integer value pass pairs with the
        // row after the V data.
        for (int page_tokens : {16, 33, 64, 256}) {
          for (int group : {1, 3, 4, 8}) {
            const int tokens = (seed % 4 == 0) ? page_tokens : 1 + static_cast<int>(seed % static_cast<std::uint32_t>(page_tokens));
            CAPTURE(isa_name(isa), format_name(kf), format_name(vf), dim, page_tokens, tokens, group);
            const TestPage first = make_page(kf, vf, page_tokens, dim, page_tokens, seed++);
            const TestPage second = make_page(kf, vf, page_tokens, dim, tokens, seed++);
            const auto q = queries(group, dim, seed++);
            std::vector<float> got = empty_states(group, dim), want = empty_states(group, dim);
            // Two pages: the second folds into a non-empty state. Each page's log-sum-exp too.
            std::vector<float> got_lse(2 * group), want_lse(2 * group);
            kernels.decode_page(first.view(), q.data(), group, got.data(), got_lse.data());
            kernels.decode_page(second.view(), q.data(), group, got.data(), got_lse.data() + group);
            // SIMD kernels take integer dot products on q4 (int_dot.h): their twin reproduces
            // the integers; a weight on a rounding boundary may round the other way (slack).
            const IntDotPaths paths = isa == Isa::Scalar ? IntDotPaths{} : int_dot_paths(first.layout);
            std::vector<float> slack;
            if (paths.k || paths.v) {
              std::vector<float> q1(group), q2(group);
              decode_page_int_ref(first.view(), q.data(), group, want.data(), want_lse.data(), q1.data());
              decode_page_int_ref(second.view(), q.data(), group, want.data(), want_lse.data() + group, q2.data());
              for (int g = 0; g < group; ++g) slack.push_back(q1[g] + q2[g]);
              ++integer_cases;
            } else {
              decode_page_ref(first.view(), q.data(), group, want.data(), want_lse.data());
              decode_page_ref(second.view(), q.data(), group, want.data(), want_lse.data() + group);
            }
            require_states_close(got, want, group, dim, slack);
            for (int i = 0; i < 2 * group; ++i) REQUIRE(got_lse[i] == Approx(want_lse[i]).margin(1e-4));
          }
        }
      }
    }
  }
  if (supported_isas().size() > 1) CHECK(integer_cases > 0);
}

TEST_CASE("Every prefill kernel matches the reference with the causal mask", "[attention]") {
  std::uint32_t seed = 5000;
  for (Isa isa : supported_isas()) {
    const PageKernels& kernels = page_kernels(isa);
    for (auto [kf, vf] : format_pairs()) {
      for (int dim : {8, 64, 128}) {
        const int page_tokens = 16, tokens = 13, group = 2, n = 20;
        // Page tokens sit at positions 32..44; queries at 30..49: the first two see nothing.
        const int token_pos = 32, query_pos = 30;
        CAPTURE(isa_name(isa), format_name(kf), format_name(vf), dim);
        const TestPage page = make_page(kf, vf, page_tokens, dim, tokens, seed++);
        const auto q = queries(n * group, dim, seed++);
        const std::size_t stride = SoftmaxState::stride(dim);
        std::vector<float> got(n * group * stride), want(n * group * stride);
        std::vector<float> scratch(2 * kMaxPageTokens * dim);
        for (int i = 0; i < n * group; ++i) {
          SoftmaxState(got.data() + i * stride, dim).reset();
          SoftmaxState(want.data() + i * stride, dim).reset();
        }
        kernels.prefill_page({page.view(), token_pos, q.data(), n, group, query_pos, got.data(), scratch.data()});
        for (int i = 0; i < n; ++i) {
          const int visible = std::min(tokens, query_pos + i - token_pos + 1);
          if (visible <= 0) continue;
          const PageView prefix{&page.layout, page.bytes.data(), visible};
          decode_page_ref(prefix, q.data() + i * group * dim, group, want.data() + i * group * stride);
        }
        require_states_close(got, want, n * group, dim);
      }
    }
  }
}

TEST_CASE("Every page_bounds kernel matches the reference on each page", "[attention]") {
  std::uint32_t seed = 9000;
  for (Isa isa : supported_isas()) {
    for (Format f : kAllFormats) {
      for (int dim : {8, 24, 64, 128, 256}) {
        for (int group : {1, 3, 4, 8}) {
          // A partial page among full ones: one call covers them all, their bounds one after another.
          std::vector<TestPage> pages;
          std::vector<PageView> views;
          std::vector<std::uint16_t> bounds;
          for (int tokens : {64, 50, 64}) pages.push_back(make_page(f, f, 64, dim, tokens, seed++));
          for (const TestPage& page : pages) {
            views.push_back(page.view());
            bounds.insert(bounds.end(), views.back().key_min(), views.back().key_min() + dim);
            bounds.insert(bounds.end(), views.back().key_max(), views.back().key_max() + dim);
          }
          const auto q = queries(group, dim, seed++);
          std::vector<float> got(views.size(), NAN);
          page_kernels(isa).page_bounds(bounds.data(), views.size(), dim, q.data(), group, got.data());
          for (std::size_t i = 0; i < views.size(); ++i) {
            CAPTURE(isa_name(isa), format_name(f), dim, group, i);
            REQUIRE(got[i] == Approx(page_bound_ref(views[i], q.data(), group)).margin(1e-4));
          }
        }
      }
    }
  }
}

TEST_CASE("Wide heads decode against the reference, with more V groups than the integer pass holds", "[attention]") {
  // head_dim 512: groups of 32 make 16 V groups, past kMaxIntVGroups, so q4 values take the
  // float value pass; groups of 64 make 8 and take the integer one. K stays on floats (> 256).
  std::uint32_t seed = 7000;
  for (Isa isa : supported_isas()) {
    for (int v_group : {32, 64}) {
      for (int tokens : {64, 37}) {
        const int dim = 512, group = 4;
        const TestPage page = make_page(Format::Q4, Format::Q4, 64, dim, tokens, seed++, v_group);
        CAPTURE(isa_name(isa), v_group, tokens);
        REQUIRE(int_dot_paths(page.layout).v == (v_group == 64));
        REQUIRE_FALSE(int_dot_paths(page.layout).k);
        const auto q = queries(group, dim, seed++);
        std::vector<float> got = empty_states(group, dim), want = empty_states(group, dim);
        page_kernels(isa).decode_page(page.view(), q.data(), group, got.data(), nullptr);
        std::vector<float> slack(group, 0.0f);
        if (isa != Isa::Scalar) {
          decode_page_int_ref(page.view(), q.data(), group, want.data(), nullptr, slack.data());
        } else {
          decode_page_ref(page.view(), q.data(), group, want.data());
        }
        require_states_close(got, want, group, dim, slack);
      }
    }
  }
}

TEST_CASE("Integer dot products stay inside q4's own error against exact attention", "[attention]") {
  // Output error against attention over the unquantized K/V, summed over many pages: the SIMD
  // kernel (int8 queries, 7-bit weights) against the float path on the same q4 pages.
  for (Isa isa : supported_isas()) {
    if (isa == Isa::Scalar) continue;
    for (int dim : {64, 128, 256}) {
      double int_error = 0.0, format_error = 0.0;
      std::uint32_t seed = 9000 + static_cast<std::uint32_t>(dim);
      for (int trial = 0; trial < 24; ++trial) {
        const int group = 4, tokens = 64;
        const PageLayout q4 = PageLayout::make({64, dim, Format::Q4, Format::Q4, 32, false});
        const PageLayout f32 = PageLayout::make({64, dim, Format::F32, Format::F32, 32, false});
        const auto k = kvtest::random_keys(tokens, 1, dim, seed++);
        const auto v = kvtest::random_values(static_cast<std::size_t>(tokens) * dim, seed++);
        std::vector<std::byte> q4_page(q4.bytes), f32_page(f32.bytes);
        quantize_page(q4, k.data(), v.data(), tokens, q4_page.data(), nullptr);
        quantize_page(f32, k.data(), v.data(), tokens, f32_page.data(), nullptr);
        REQUIRE(int_dot_paths(q4).k);
        REQUIRE(int_dot_paths(q4).v);
        const auto q = queries(group, dim, seed++);
        const std::size_t stride = SoftmaxState::stride(dim);
        std::vector<float> kernel(group * stride), format(group * stride), exact(group * stride);
        for (int g = 0; g < group; ++g) {
          SoftmaxState(kernel.data() + g * stride, dim).reset();
          SoftmaxState(format.data() + g * stride, dim).reset();
          SoftmaxState(exact.data() + g * stride, dim).reset();
        }
        page_kernels(isa).decode_page({&q4, q4_page.data(), tokens}, q.data(), group, kernel.data(), nullptr);
        decode_page_ref({&q4, q4_page.data(), tokens}, q.data(), group, format.data());
        decode_page_ref({&f32, f32_page.data(), tokens}, q.data(), group, exact.data());
        for (int g = 0; g < group; ++g) {
          std::vector<float> a(dim), b(dim), e(dim);
          SoftmaxState(kernel.data() + g * stride, dim).write_output(a.data());
          SoftmaxState(format.data() + g * stride, dim).write_output(b.data());
          SoftmaxState(exact.data() + g * stride, dim).write_output(e.data());
          for (int c = 0; c < dim; ++c) {
            int_error += (a[c] - e[c]) * (a[c] - e[c]);
            format_error += (b[c] - e[c]) * (b[c] - e[c]);
          }
        }
      }
      CAPTURE(isa_name(isa), dim, std::sqrt(int_error), std::sqrt(format_error));
      REQUIRE(std::sqrt(int_error) <= 1.1 * std::sqrt(format_error));
    }
  }
}
