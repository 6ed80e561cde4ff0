// Compensation for dropped pages: the gather takes exactly the pages a plan leaves out (sealed
// pages' f16 means, residual pages' row averages, empty pages skipped), and the fast states
// agree with the double-precision reference on random shapes and magnitudes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "attention/compensation.h"
#include "attention/softmax_state.h"
#include "quant/fp16.h"

using namespace kv;

namespace {

PageLayout residual_layout(int tokens, int dim) {
  PageLayoutSpec spec;
  spec.page_tokens = tokens;
  spec.head_dim = dim;
  spec.k_format = Format::F32;
  spec.v_format = Format::F32;
  return PageLayout::make(spec);
}

}  // namespace

TEST_CASE("gather_dropped_pages takes the pages the plan leaves out, in order", "[attention][compensation]") {
  constexpr int dim = 8, tokens = 16;
  const PageLayout layout = residual_layout(tokens, dim);
  // Pages 0-2 sealed (means k = p + c, v = -(p + c)), page 3 empty, page 4 a residual page of
  // 3 rows whose average is known.
  std::vector<std::vector<std::uint16_t>> means(3, std::vector<std::uint16_t>(2 * dim));
  std::vector<PageView> pages(5);
  for (int p = 0; p < 3; ++p) {
    for (int c = 0; c < dim; ++c) {
      means[p][c] = f32_to_f16(static_cast<float>(p + c));
      means[p][dim + c] = f32_to_f16(-static_cast<float>(p + c));
    }
    pages[p].means = means[p].data();
    pages[p].tokens = tokens;
  }
  pages[3].tokens = 0;
  std::vector<std::byte> residual(layout.bytes);
  float* k = layout.at<float>(residual.data(), layout.k_data);
  float* v = layout.at<float>(residual.data(), layout.v_data);
  for (int t = 0; t < 3; ++t) {
    for (int c = 0; c < dim; ++c) {
      k[t * dim + c] = static_cast<float>(t + 1);  // mean 2
      v[t * dim + c] = static_cast<float>(3 * t);  // mean 3
    }
  }
  pages[4].layout = &layout;
  pages[4].data = residual.data();
  pages[4].tokens = 3;

  DroppedPages dropped;
  gather_dropped_pages(pages, {1}, layout, dim, dropped);  // keeps page 1
  REQUIRE(dropped.count() == 3);                           // pages 0, 2 and 4 (3 is empty)
  CHECK(dropped.k_means[0] == 0.0f);
  CHECK(dropped.v_means[dim + 1] == -3.0f);  // page 2, channel 1
  CHECK(dropped.k_means[2 * dim] == Approx(2.0f));
  CHECK(dropped.v_means[2 * dim + 3] == Approx(3.0f));
  CHECK(dropped.log_tokens[0] == Approx(std::log(16.0f)));
  CHECK(dropped.log_tokens[2] == Approx(std::log(3.0f)));
  // Everything kept: nothing dropped, and the states are empty.
  gather_dropped_pages(pages, {0, 1, 2, 3, 4}, layout, dim, dropped);
  CHECK(dropped.count() == 0);
  std::vector<float> states(2 * SoftmaxState::stride(dim), 7.0f), q(2 * dim, 1.0f);
  compensation_states(dropped, q.data(), 2, 0.5f, states.data());
  CHECK(SoftmaxState(states.data(), dim).empty());
  CHECK(SoftmaxState(states.data() + SoftmaxState::stride(dim), dim).empty());
}

TEST_CASE("compensation states match the double-precision reference on random shapes", "[attention][compensation]") {
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> pick_dim(1, 160), pick_count(1, 300), pick_group(1, 8);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f), magnitude(0.1f, 8.0f);
  for (int trial = 0; trial < 60; ++trial) {
    const int dim = pick_dim(rng), group = pick_group(rng), count = pick_count(rng);
    const float scale = 1.0f / std::sqrt(static_cast<float>(dim)), spread = magnitude(rng);
    DroppedPages dropped;
    dropped.dim = dim;
    for (int i = 0; i < count * dim; ++i) {
      dropped.k_means.push_back(spread * unit(rng));
      dropped.v_means.push_back(unit(rng));
    }
    std::uniform_int_distribution<int> tokens(1, 64);
    for (int i = 0; i < count; ++i) dropped.log_tokens.push_back(std::log(static_cast<float>(tokens(rng))));
    std::vector<float> q(static_cast<std::size_t>(group * dim));
    for (float& x : q) x = spread * unit(rng);
    const std::size_t stride = SoftmaxState::stride(dim);
    std::vector<float> fast(group * stride), ref(group * stride), out_fast(dim), out_ref(dim);
    compensation_states(dropped, q.data(), group, scale, fast.data());
    compensation_states_ref(dropped, q.data(), group, scale, ref.data());
    for (int qh = 0; qh < group; ++qh) {
      INFO("trial " << trial << ": dim " << dim << ", group " << group << ", pages " << count << ", q head " << qh);
      const SoftmaxState a(fast.data() + qh * stride, dim), b(ref.data() + qh * stride, dim);
      CHECK(a.max() == Approx(b.max()).epsilon(1e-5).margin(1e-5));
      CHECK(a.sum() == Approx(b.sum()).epsilon(1e-4));
      a.write_output(out_fast.data());
      b.write_output(out_ref.data());
      for (int c = 0; c < dim; ++c) CHECK(out_fast[c] == Approx(out_ref[c]).margin(1e-4));
    }
  }
}
