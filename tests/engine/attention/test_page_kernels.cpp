#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <iterator>
#include <random>
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

// What a decode kernel of `isa` must compute for pages `first` then `second`: states and each
// page's log-sum-exp (lse: [2][group]). SIMD kernels take integer dot products on q4
// (int_dot.h): their twin reproduces the integers, and a weight on a rounding boundary may
// round the other way; the returned slack (per state) bounds that, empty on float paths.
std::vector<float> fold_two_pages_ref(Isa isa, const TestPage& first, const TestPage& second, const std::vector<float>& q,
                                      int group, std::vector<float>& states, std::vector<float>& lse) {
  const IntDotPaths paths = int_dot_paths(first.layout, isa);
  if (!paths.k && !paths.v) {
    decode_page_ref(first.view(), q.data(), group, states.data(), lse.data());
    decode_page_ref(second.view(), q.data(), group, states.data(), lse.data() + group);
    return {};
  }
  std::vector<float> q1(static_cast<std::size_t>(group)), q2(q1.size()), slack(q1.size());
  decode_page_int_ref(isa, first.view(), q.data(), group, states.data(), lse.data(), q1.data());
  decode_page_int_ref(isa, second.view(), q.data(), group, states.data(), lse.data() + group, q2.data());
  for (std::size_t g = 0; g < slack.size(); ++g) slack[g] = q1[g] + q2[g];
  return slack;
}

// What a prefill kernel must compute: query i (at query_pos + i) folds the page's tokens up to
// its own position (at token_pos + t) into its group's states, through the decode reference.
void fold_causal_ref(const TestPage& page, int token_pos, const std::vector<float>& q, int n, int group, int query_pos,
                     std::vector<float>& states) {
  const int dim = page.layout.head_dim;
  const std::size_t stride = SoftmaxState::stride(dim);
  for (int i = 0; i < n; ++i) {
    const int visible = std::min(page.tokens, query_pos + i - token_pos + 1);
    if (visible <= 0) continue;
    const PageView prefix{&page.layout, page.bytes.data(), visible};
    decode_page_ref(prefix, q.data() + static_cast<std::size_t>(i) * group * dim, group, states.data() + i * group * stride);
  }
}

// A V group that divides the head, chosen by `seed`: 32 (the default) half the time, else any
// whole number of 8-channel blocks that divides it (8, 16, 24 or 48 channels for a head of 48).
int pick_v_group(int dim, std::uint32_t seed) {
  std::vector<int> choices;
  for (int g = 8; g <= dim; g += 8) {
    if (dim % g == 0) choices.push_back(g);
  }
  if (seed % 2 == 0 && dim % 32 == 0) return 32;
  return choices[(seed / 2) % choices.size()];
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
  for (auto [kf, vf] : format_pairs()) {
    // 96: q8's integer K on Arm, q4's K on floats; 48: stories15M's head.
    for (int dim : {8, 24, 48, 64, 96, 128, 256}) {
      // 33: a full page of odd length, whose last token the integer value pass pairs with the
      // row after the V data.
      for (int page_tokens : {16, 33, 64, 256}) {
        for (int group : {1, 3, 4, 8}) {
          // The pages, the queries and the float reference are the same for every ISA.
          const int tokens = (seed % 4 == 0) ? page_tokens : 1 + static_cast<int>(seed % static_cast<std::uint32_t>(page_tokens));
          const int v_group = pick_v_group(dim, seed);
          const TestPage first = make_page(kf, vf, page_tokens, dim, page_tokens, seed++, v_group);
          const TestPage second = make_page(kf, vf, page_tokens, dim, tokens, seed++, v_group);
          const auto q = queries(group, dim, seed++);
          std::vector<float> float_want, float_lse;
          for (Isa isa : kvtest::tested_isas()) {
            CAPTURE(isa_name(isa), format_name(kf), format_name(vf), dim, v_group, page_tokens, tokens, group);
            const PageKernels& kernels = page_kernels(isa);
            std::vector<float> got = empty_states(group, dim), want = empty_states(group, dim);
            // Two pages: the second folds into a non-empty state. Each page's log-sum-exp too.
            std::vector<float> got_lse(2 * group), want_lse(2 * group);
            kernels.decode_page(first.view(), q.data(), group, got.data(), got_lse.data());
            kernels.decode_page(second.view(), q.data(), group, got.data(), got_lse.data() + group);
            std::vector<float> slack;
            const IntDotPaths paths = int_dot_paths(first.layout, isa);
            if (paths.k || paths.v) {
              slack = fold_two_pages_ref(isa, first, second, q, group, want, want_lse);
              ++integer_cases;
            } else {
              if (float_want.empty()) {
                float_want = want;
                float_lse = want_lse;
                fold_two_pages_ref(isa, first, second, q, group, float_want, float_lse);
              }
              want = float_want;
              want_lse = float_lse;
            }
            require_states_close(got, want, group, dim, slack);
            for (int i = 0; i < 2 * group; ++i) REQUIRE(got_lse[i] == Approx(want_lse[i]).margin(1e-4));
          }
        }
      }
    }
  }
  const PageLayout q4 = PageLayout::make({64, 128, Format::Q4, Format::Q4, 32, false});
  bool any_integer = false;
  for (Isa isa : kvtest::tested_isas()) any_integer = any_integer || int_dot_paths(q4, isa).k;
  CHECK((integer_cases > 0) == any_integer);
}

// Verification folds k draft queries times the GQA group into one call (paged_attention.cpp);
// on AVX-512 with VNNI more than four q4 rows take their own kernel, which holds 32 rows at a
// time (40: two passes) and tiles four rows by four blocks (5, 13: remainders).
TEST_CASE("Decode with many rows, as verification calls it, matches the reference", "[attention]") {
  std::uint32_t seed = 5000;
  for (Isa isa : kvtest::tested_isas()) {
    const PageKernels& kernels = page_kernels(isa);
    for (int dim : {128, 256}) {
      // Every V group the integer value pass takes: 32, 64, 128 and the whole head.
      for (int v_group : {32, 64, 128, 256}) {
        if (v_group > dim) continue;
        for (int page_tokens : {16, 33, 64, 100, 256}) {
          for (int rows : {5, 13, 16, 32, 40}) {
            const int tokens = (seed % 3 == 0) ? page_tokens : 1 + static_cast<int>(seed % static_cast<std::uint32_t>(page_tokens));
            CAPTURE(isa_name(isa), dim, v_group, page_tokens, tokens, rows);
            const TestPage first = make_page(Format::Q4, Format::Q4, page_tokens, dim, page_tokens, seed++, v_group);
            const TestPage second = make_page(Format::Q4, Format::Q4, page_tokens, dim, tokens, seed++, v_group);
            const auto q = queries(rows, dim, seed++);
            std::vector<float> got = empty_states(rows, dim), want = empty_states(rows, dim);
            std::vector<float> got_lse(2 * rows), want_lse(2 * rows);
            kernels.decode_page(first.view(), q.data(), rows, got.data(), got_lse.data());
            kernels.decode_page(second.view(), q.data(), rows, got.data(), got_lse.data() + rows);
            const std::vector<float> slack = fold_two_pages_ref(isa, first, second, q, rows, want, want_lse);
            require_states_close(got, want, rows, dim, slack);
            for (int i = 0; i < 2 * rows; ++i) REQUIRE(got_lse[i] == Approx(want_lse[i]).margin(1e-4));
            // Row by row through a group of one: the same integers, so the same result up to
            // float rounding and the weights' rounding slack.
            std::vector<float> single = empty_states(rows, dim);
            const std::size_t stride = SoftmaxState::stride(dim);
            for (int r = 0; r < rows; ++r) {
              kernels.decode_page(first.view(), q.data() + static_cast<std::size_t>(r) * dim, 1, single.data() + r * stride, nullptr);
              kernels.decode_page(second.view(), q.data() + static_cast<std::size_t>(r) * dim, 1, single.data() + r * stride, nullptr);
            }
            std::vector<float> twice(slack);
            for (float& x : twice) x *= 2.0f;
            require_states_close(got, single, rows, dim, twice);
          }
        }
      }
    }
  }
}

TEST_CASE("Every prefill kernel matches the reference with the causal mask", "[attention]") {
  std::uint32_t seed = 5000;
  for (Isa isa : kvtest::tested_isas()) {
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
        std::vector<float> scratch(prefill_scratch_floats(dim));
        for (int i = 0; i < n * group; ++i) {
          SoftmaxState(got.data() + i * stride, dim).reset();
          SoftmaxState(want.data() + i * stride, dim).reset();
        }
        kernels.prefill_page({page.view(), token_pos, q.data(), n, group, query_pos, got.data(), scratch.data()});
        fold_causal_ref(page, token_pos, q, n, group, query_pos, want);
        require_states_close(got, want, n * group, dim);
      }
    }
  }
}

TEST_CASE("Every prefill kernel matches the reference on random shapes, over states already holding a page",
          "[attention]") {
  // Random page sizes 16..256 with partial pages, head_dim 8..512, GQA 1..8, query counts that
  // are not multiples of any tile, every format pair, and the causal boundary anywhere in the
  // page (or before it, or past it). Half the states already hold another page, so the
  // kernels' rescale of an earlier output is checked too.
  std::mt19937 rng(4242);
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::uint32_t seed = 15000;
  for (Isa isa : kvtest::tested_isas()) {
    const PageKernels& kernels = page_kernels(isa);
    for (int trial = 0; trial < 60; ++trial) {
      const Format kf = kAllFormats[static_cast<std::size_t>(pick(0, static_cast<int>(std::size(kAllFormats)) - 1))];
      const Format vf = kAllFormats[static_cast<std::size_t>(pick(0, static_cast<int>(std::size(kAllFormats)) - 1))];
      const int page_tokens = pick(kMinPageTokens, kMaxPageTokens);
      const int tokens = trial % 3 == 0 ? page_tokens : pick(1, page_tokens);
      // Heads of whole 8-channel blocks, up to the widest (512) now and then, in V groups that divide them.
      const int dim = trial % 4 == 1 ? 8 * pick(1, 6) : 32 * pick(1, trial % 5 == 0 ? 16 : 8);
      const int group = std::array{1, 2, 3, 4, 8}[static_cast<std::size_t>(pick(0, 4))];
      const int n = pick(1, 37);
      const int token_pos = 300;
      const int query_pos = pick(token_pos - n, token_pos + tokens + 3);
      const int v_group = pick_v_group(dim, static_cast<std::uint32_t>(pick(0, 1000)));
      CAPTURE(isa_name(isa), format_name(kf), format_name(vf), page_tokens, tokens, dim, v_group, group, n, query_pos);
      const TestPage page = make_page(kf, vf, page_tokens, dim, tokens, seed++, v_group);
      const TestPage before = make_page(kf, vf, page_tokens, dim, page_tokens, seed++, v_group);
      const auto q = queries(n * group, dim, seed++);
      const std::size_t stride = SoftmaxState::stride(dim);
      std::vector<float> got = empty_states(n * group, dim);
      for (int i = 0; i < n; i += 2) decode_page_ref(before.view(), q.data() + i * group * dim, group, got.data() + i * group * stride);
      std::vector<float> want = got;
      std::vector<float> scratch(prefill_scratch_floats(dim));
      kernels.prefill_page({page.view(), token_pos, q.data(), n, group, query_pos, got.data(), scratch.data()});
      fold_causal_ref(page, token_pos, q, n, group, query_pos, want);
      require_states_close(got, want, n * group, dim);
    }
  }
}

TEST_CASE("Every page_bounds kernel matches the reference on each page", "[attention]") {
  std::uint32_t seed = 9000;
  for (Isa isa : kvtest::tested_isas()) {
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
  // float value pass; groups of 64 make 8 and take the integer one. K stays on floats on x86
  // (> 256); Arm's integer K sums in int32, q8's 14-bit query nearest its limit here.
  std::uint32_t seed = 7000;
  for (Isa isa : kvtest::tested_isas()) {
    for (Format kf : {Format::Q4, Format::Q8}) {
      for (int v_group : {32, 64}) {
        for (int tokens : {64, 37}) {
          const int dim = 512, group = 4;
          const TestPage page = make_page(kf, Format::Q4, 64, dim, tokens, seed++, v_group);
          CAPTURE(isa_name(isa), format_name(kf), v_group, tokens);
          const IntDotPaths paths = int_dot_paths(page.layout, isa);
          if (paths.k || paths.v) {  // x86 keeps K on floats past 256 channels; Arm sums in int32
            REQUIRE(paths.v == (v_group == 64));
            REQUIRE(paths.k == (isa == Isa::Dotprod || isa == Isa::I8mm));
          }
          const auto q = queries(group, dim, seed++);
          std::vector<float> got = empty_states(group, dim), want = empty_states(group, dim);
          page_kernels(isa).decode_page(page.view(), q.data(), group, got.data(), nullptr);
          std::vector<float> slack(group, 0.0f);
          if (paths.k || paths.v) {
            decode_page_int_ref(isa, page.view(), q.data(), group, want.data(), nullptr, slack.data());
          } else {
            decode_page_ref(page.view(), q.data(), group, want.data());
          }
          require_states_close(got, want, group, dim, slack);
        }
      }
    }
  }
}

TEST_CASE("Integer dot products stay inside the format's own error against exact attention", "[attention]") {
  // Output error against attention over the unquantized K/V, summed over many pages: the SIMD
  // kernel (integer queries, 7-bit weights) against the float path on the same pages. q4 K and V
  // (every path with integer dot products), q8 K with f32 V (Arm's SDOT / USMMLA paths, a 14-bit
  // query: an int8 one measured 1.76 times the format's error at head_dim 128).
  struct Case {
    Format k, v;
    double bound;  // int error / format error
  };
  for (Isa isa : kvtest::tested_isas()) {
    for (const Case& c : {Case{Format::Q4, Format::Q4, 1.1}, Case{Format::Q8, Format::F32, 1.02}}) {
      for (int dim : {64, 128, 256}) {
        const PageLayout quantized = PageLayout::make({64, dim, c.k, c.v, 32, false});
        const PageLayout f32 = PageLayout::make({64, dim, Format::F32, Format::F32, 32, false});
        const IntDotPaths paths = int_dot_paths(quantized, isa);
        if (!paths.k) continue;
        if (c.v == Format::Q4) REQUIRE(paths.v);
        double int_error = 0.0, format_error = 0.0;
        std::uint32_t seed = 9000 + static_cast<std::uint32_t>(dim);
        for (int trial = 0; trial < 24; ++trial) {
          const int group = 4, tokens = 64;
          const auto k = kvtest::random_keys(tokens, 1, dim, seed++);
          const auto v = kvtest::random_values(static_cast<std::size_t>(tokens) * dim, seed++);
          std::vector<std::byte> q_page(quantized.bytes), f32_page(f32.bytes);
          quantize_page(quantized, k.data(), v.data(), tokens, q_page.data(), nullptr);
          quantize_page(f32, k.data(), v.data(), tokens, f32_page.data(), nullptr);
          const auto q = queries(group, dim, seed++);
          std::vector<float> kernel = empty_states(group, dim), format = empty_states(group, dim), exact = empty_states(group, dim);
          const std::size_t stride = SoftmaxState::stride(dim);
          page_kernels(isa).decode_page({&quantized, q_page.data(), tokens}, q.data(), group, kernel.data(), nullptr);
          decode_page_ref({&quantized, q_page.data(), tokens}, q.data(), group, format.data());
          decode_page_ref({&f32, f32_page.data(), tokens}, q.data(), group, exact.data());
          for (int g = 0; g < group; ++g) {
            std::vector<float> a(dim), b(dim), e(dim);
            SoftmaxState(kernel.data() + g * stride, dim).write_output(a.data());
            SoftmaxState(format.data() + g * stride, dim).write_output(b.data());
            SoftmaxState(exact.data() + g * stride, dim).write_output(e.data());
            for (int ch = 0; ch < dim; ++ch) {
              int_error += (a[ch] - e[ch]) * (a[ch] - e[ch]);
              format_error += (b[ch] - e[ch]) * (b[ch] - e[ch]);
            }
          }
        }
        CAPTURE(isa_name(isa), format_name(c.k), format_name(c.v), dim, std::sqrt(int_error), std::sqrt(format_error));
        REQUIRE(std::sqrt(int_error) <= c.bound * std::sqrt(format_error));
      }
    }
  }
}

namespace {

// Which K formats a path scores with integer queries, written out here rather than read from
// int_dot_paths (which the kernels read too): x86 takes q4; Arm dotprod and i8mm q4 and q8.
bool expect_integer_k(Isa isa, Format k) {
  switch (isa) {
    case Isa::Avx2:
    case Isa::Avx512: return k == Format::Q4;
    case Isa::Dotprod:
    case Isa::I8mm: return k == Format::Q4 || k == Format::Q8;
    default: return false;
  }
}

// A page and query on which an integer query and a float one give plainly different attention.
// Channel 0's keys alternate between 0 and 2 and its folded query is -254, the largest: the
// tokens whose key is 0 take all the weight, and channel 0 adds nothing to their scores (nor
// to the bias), so the scores stay small. Every other channel's folded query sits half a query
// step from 0, where the integer query rounds to 0 or 1 steps, which changes how the weight
// spreads over those tokens; the float query keeps the half step.
struct DispatchProbe {
  TestPage page;
  std::vector<float> q;
};
DispatchProbe dispatch_probe(Format kf, int dim, std::uint32_t seed) {
  DispatchProbe probe;
  const int tokens = 64;
  probe.page.layout = PageLayout::make({64, dim, kf, Format::F32, 32, false});
  probe.page.bytes.resize(probe.page.layout.bytes);
  probe.page.tokens = tokens;
  auto k = kvtest::random_values(static_cast<std::size_t>(tokens) * dim, seed);
  for (int t = 0; t < tokens; ++t) k[static_cast<std::size_t>(t) * dim] = t % 2 == 0 ? 0.0f : 2.0f;
  const auto v = kvtest::random_values(static_cast<std::size_t>(tokens) * dim, seed + 1);
  quantize_page(probe.page.layout, k.data(), v.data(), tokens, probe.page.bytes.data(), nullptr);
  const bool codes = kf == Format::Q4 || kf == Format::Q8;
  const float* scale = codes ? probe.page.layout.at<float>(probe.page.bytes.data(), probe.page.layout.k_scale) : nullptr;
  const float half_step = codes ? 254.0f / (2.0f * query_code_max(kf)) : 1.0f;
  probe.q.resize(static_cast<std::size_t>(dim));
  for (int c = 0; c < dim; ++c) probe.q[c] = (c == 0 ? -254.0f : half_step) / (codes ? scale[c] : 1.0f);
  return probe;
}

}  // namespace

TEST_CASE("Dispatch sends q8 and q4 to the integer instructions and float formats to the float ones", "[attention]") {
  // Every supported path, on a probe whose integer and float results differ by orders of
  // magnitude more than the kernels' bound: the result shows which code ran. Under qemu -cpu max
  // this covers dotprod and i8mm, under a CPU model without dotprod the NEON fallback.
  std::uint32_t seed = 12000;
  for (Isa isa : kvtest::tested_isas()) {
    for (Format kf : {Format::Q4, Format::Q8, Format::F16, Format::F32}) {
      for (int dim : {64, 128}) {
        const DispatchProbe probe = dispatch_probe(kf, dim, seed++);
        const bool integer = expect_integer_k(isa, kf);
        CAPTURE(isa_name(isa), format_name(kf), dim, integer);
        REQUIRE(int_dot_paths(probe.page.layout, isa).k == integer);
        std::vector<float> got = empty_states(1, dim), twin = empty_states(1, dim), floats = empty_states(1, dim);
        page_kernels(isa).decode_page(probe.page.view(), probe.q.data(), 1, got.data(), nullptr);
        decode_page_int_ref(isa, probe.page.view(), probe.q.data(), 1, twin.data(), nullptr);
        decode_page_ref(probe.page.view(), probe.q.data(), 1, floats.data());
        std::vector<float> a(dim), b(dim), out(dim);
        SoftmaxState(twin.data(), dim).write_output(a.data());
        SoftmaxState(floats.data(), dim).write_output(b.data());
        SoftmaxState(got.data(), dim).write_output(out.data());
        if (integer) REQUIRE(kvtest::max_abs_diff(a, b) > 0.5f);  // the probe tells the two apart (1.5 to 2.7 measured)
        const auto& want = integer ? a : b;
        REQUIRE(kvtest::max_abs_diff(out, want) < 1e-3f);
      }
    }
  }
}
