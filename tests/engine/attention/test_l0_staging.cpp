// Attention through the L0 arena: batches of pages copied into halves of L0 and merged through
// SoftmaxState give the direct call's output, per-page log-sum-exps and query log-sum-exps up to
// rounding, on random shapes; an L0 whose half cannot hold one page of every kv head is refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "attention/l0_staging.h"
#include "engine/attention/random_pages.h"
#include "test_support.h"

using namespace kv;
using kvtest::RandomPages;
using kvtest::random_pages;


TEST_CASE("attention staged through L0 agrees with the direct call on random shapes", "[attention][l0][threads]") {
  std::mt19937 rng(17);
  ThreadPool pool(2);
  AttentionWorkspace workspace;
  const Format formats[] = {Format::F16, Format::Q8, Format::Q4};
  for (int trial = 0; trial < 12; ++trial) {
    const int kv_heads = std::uniform_int_distribution<int>(1, 4)(rng);
    const int group = std::uniform_int_distribution<int>(1, 4)(rng);
    const int dim = 32 * std::uniform_int_distribution<int>(1, 4)(rng);  // a multiple of the V group
    const int page_tokens = 16 * std::uniform_int_distribution<int>(1, 4)(rng);
    const int ctx = std::uniform_int_distribution<int>(1, 40 * page_tokens)(rng);
    const Format f = formats[trial % 3];
    CAPTURE(trial, kv_heads, group, dim, page_tokens, ctx, format_name(f));
    const RandomPages kv = random_pages(f, kv_heads, dim, page_tokens, ctx, 1000u * static_cast<std::uint32_t>(trial));
    const AttentionShape shape{kv_heads * group, kv_heads, dim, 1.0f / std::sqrt(static_cast<float>(dim))};
    const auto q = kvtest::random_values(static_cast<std::size_t>(shape.q_heads) * dim, 99u + static_cast<std::uint32_t>(trial));
    const std::size_t pages = kv.views[0].size();
    std::vector<float> direct(q.size()), staged(q.size()), lse_direct(static_cast<std::size_t>(shape.q_heads)),
        lse_staged(lse_direct.size()), page_direct(pages * static_cast<std::size_t>(shape.q_heads)), page_staged(page_direct.size());
    PagedAttentionArgs args;
    args.shape = shape;
    args.pages = &kv.views;
    args.q = q.data();
    args.out = direct.data();
    args.query_lse = lse_direct.data();
    args.page_lse = page_direct.data();
    paged_attention(page_kernels(Isa::Scalar), pool, args, workspace);
    // Room for two to five page positions of every head per half.
    const std::size_t column = static_cast<std::size_t>(kv_heads) * ((kv.layout.bytes + kPageAlign - 1) / kPageAlign * kPageAlign);
    L0Stager l0(2 * column * std::uniform_int_distribution<std::size_t>(2, 5)(rng));
    args.out = staged.data();
    args.query_lse = lse_staged.data();
    args.page_lse = page_staged.data();
    l0.attend(page_kernels(Isa::Scalar), pool, args, workspace);
    CHECK(kvtest::relative_error(staged, direct) < 1e-5f);
    for (std::size_t i = 0; i < lse_direct.size(); ++i) CHECK(lse_staged[i] == Approx(lse_direct[i]).margin(1e-4));
    for (std::size_t i = 0; i < page_direct.size(); ++i) CHECK(page_staged[i] == Approx(page_direct[i]).margin(1e-4));
  }
}

TEST_CASE("an L0 whose half cannot hold one page of every kv head is refused", "[attention][l0]") {
  ThreadPool pool(1);
  AttentionWorkspace workspace;
  const RandomPages kv = random_pages(Format::F16, 4, 128, 64, 200, 5);
  const AttentionShape shape{4, 4, 128, 1.0f / std::sqrt(128.0f)};
  const auto q = kvtest::random_values(4 * 128, 6);
  std::vector<float> out(q.size());
  PagedAttentionArgs args;
  args.shape = shape;
  args.pages = &kv.views;
  args.q = q.data();
  args.out = out.data();
  L0Stager l0(kv.layout.bytes);  // half of it: not one page
  CHECK_THROWS_WITH(l0.attend(page_kernels(Isa::Scalar), pool, args, workspace), Catch::Contains("l0_bytes"));
}
