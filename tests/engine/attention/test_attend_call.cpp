// One attention call as the cache makes it (AttendCall over a PageAccess): on random shapes, all
// pages give the direct paged_attention result; a plan attends exactly its pages; waves under a
// byte limit and staging through L0 give the same output as holding every page at once; every
// page acquired is released on the way out, a failed call included; and a plan that does not fit
// the pages is refused before anything is acquired.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "attention/attend_call.h"
#include "engine/attention/random_pages.h"
#include "test_support.h"

using namespace kv;
using kvtest::RandomPages;
using kvtest::random_pages;

namespace {

// Pages in memory: acquire() hands out the bytes (views are built without them, as for pages in
// L2) and counts what it holds.
class FakeAccess final : public PageAccess {
 public:
  explicit FakeAccess(const RandomPages& kv) : kv_(kv) {}
  std::size_t pages() const override { return kv_.views[0].size(); }
  PageView view(std::size_t head, std::size_t page) const override {
    PageView v = kv_.views[head][page];
    v.data = nullptr;
    v.first_token = static_cast<int>(page) * kv_.layout.page_tokens;
    return v;
  }
  void acquire(std::vector<std::vector<PageView>>& views, std::size_t begin, std::size_t end) override {
    ++acquires;
    for (std::size_t h = 0; h < views.size(); ++h) {
      for (std::size_t p = begin; p < end && p < views[h].size(); ++p) {
        const auto page = static_cast<std::size_t>(views[h][p].first_token / kv_.layout.page_tokens);
        views[h][p].data = kv_.views[h][page].data;
        ++held;
      }
    }
    peak = std::max(peak, held);
  }
  void release() override { held = 0; }

  int acquires = 0;
  std::size_t held = 0, peak = 0;

 private:
  const RandomPages& kv_;
};

}  // namespace

namespace {

struct Trial {
  RandomPages kv;
  AttentionShape shape;
  std::vector<float> q;
};

Trial random_trial(std::mt19937& rng, std::uint32_t seed) {
  const int kv_heads = std::uniform_int_distribution<int>(1, 4)(rng);
  const int group = std::uniform_int_distribution<int>(1, 4)(rng);
  const int dim = 32 * std::uniform_int_distribution<int>(1, 4)(rng);
  const int page_tokens = 16 * std::uniform_int_distribution<int>(1, 4)(rng);
  const int ctx = std::uniform_int_distribution<int>(1, 30 * page_tokens)(rng);
  const Format formats[] = {Format::F16, Format::Q8, Format::Q4};
  Trial t{random_pages(formats[seed % 3], kv_heads, dim, page_tokens, ctx, seed),
          {kv_heads * group, kv_heads, dim, 1.0f / std::sqrt(static_cast<float>(dim))},
          {}};
  t.q = kvtest::random_values(static_cast<std::size_t>(t.shape.q_heads) * dim, seed + 7);
  return t;
}

AttendCallArgs args_for(const Trial& t, float* out) {
  AttendCallArgs args;
  args.shape = t.shape;
  args.q = t.q.data();
  args.out = out;
  return args;
}

}  // namespace

TEST_CASE("an attend call over all pages is the direct paged attention", "[attention][attend_call]") {
  std::mt19937 rng(5);
  ThreadPool pool(2);
  for (std::uint32_t trial = 0; trial < 10; ++trial) {
    const Trial t = random_trial(rng, 100 + trial);
    CAPTURE(trial, t.shape.q_heads, t.shape.kv_heads, t.shape.head_dim, t.kv.views[0].size());
    std::vector<float> direct(t.q.size()), called(t.q.size());
    PagedAttentionArgs whole;
    whole.shape = t.shape;
    whole.pages = &t.kv.views;
    whole.q = t.q.data();
    whole.out = direct.data();
    AttentionWorkspace workspace;
    paged_attention(page_kernels(Isa::Scalar), pool, whole, workspace);
    FakeAccess access(t.kv);
    AttendCall call(8u << 20);
    std::vector<std::vector<float>> mass;
    AttendCallArgs args = args_for(t, called.data());
    args.page_mass = &mass;
    call.run(page_kernels(Isa::Scalar), pool, access, args);
    CHECK(called == direct);  // the same kernel over the same pages, bit for bit
    CHECK(access.held == access.peak);  // held until the owner ends the step
    REQUIRE(mass.size() == t.kv.views.size());
    for (const auto& head : mass) {  // each q head's probabilities sum to 1 over the pages
      float sum = 0.0f;
      for (float m : head) sum += m;
      CHECK(sum == Approx(static_cast<float>(t.shape.group())).epsilon(1e-4));
    }
  }
}

TEST_CASE("a plan attends its pages, and waves and L0 staging give the same output", "[attention][attend_call]") {
  std::mt19937 rng(9);
  ThreadPool pool(2);
  for (std::uint32_t trial = 0; trial < 10; ++trial) {
    const Trial t = random_trial(rng, 200 + trial);
    const std::size_t pages = t.kv.views[0].size();
    CAPTURE(trial, pages);
    // Every other page and the last, per head.
    SelectionPlan plan;
    plan.total_pages = static_cast<int>(pages);
    plan.heads.resize(t.kv.views.size());
    std::vector<std::vector<PageView>> subset(t.kv.views.size());
    for (std::size_t h = 0; h < t.kv.views.size(); ++h) {
      for (std::size_t p = 0; p < pages; ++p) {
        if (p % 2 == h % 2 || p + 1 == pages) {
          plan.heads[h].pages.push_back(static_cast<int>(p));
          subset[h].push_back(t.kv.views[h][p]);
        }
      }
    }
    // Heads of different page counts: L0 staging wants one count, so it runs on the whole set.
    std::vector<float> direct(t.q.size()), planned(t.q.size()), waved(t.q.size()), staged(t.q.size());
    PagedAttentionArgs whole;
    whole.shape = t.shape;
    whole.pages = &subset;
    whole.q = t.q.data();
    whole.out = direct.data();
    whole.context_tokens = (static_cast<int>(pages) - 1) * t.kv.layout.page_tokens + t.kv.views[0].back().tokens;
    AttentionWorkspace workspace;
    paged_attention(page_kernels(Isa::Scalar), pool, whole, workspace);

    AttendCall call(8u << 20);
    FakeAccess access(t.kv);
    AttendCallArgs args = args_for(t, planned.data());
    args.plan = &plan;
    args.context_tokens = whole.context_tokens;
    call.run(page_kernels(Isa::Scalar), pool, access, args);
    CHECK(planned == direct);
    for (std::size_t h = 0; h < subset.size(); ++h) CHECK(call.views()[h].size() == subset[h].size());

    FakeAccess waves(t.kv);
    args.out = waved.data();
    args.wave_bytes = t.kv.views.size() * t.kv.layout.bytes;  // one page position a wave
    call.run(page_kernels(Isa::Scalar), pool, waves, args);
    CHECK(kvtest::relative_error(waved, direct) < 1e-5f);
    CHECK(waves.peak <= t.kv.views.size());
    std::size_t positions = 0;
    for (const auto& head : subset) positions = std::max(positions, head.size());
    if (positions > 1) CHECK(waves.acquires > 1);

    std::vector<float> all_direct(t.q.size());
    whole.pages = &t.kv.views;
    whole.out = all_direct.data();
    paged_attention(page_kernels(Isa::Scalar), pool, whole, workspace);
    FakeAccess l0(t.kv);
    AttendCallArgs through = args_for(t, staged.data());
    through.through_l0 = true;
    call.run(page_kernels(Isa::Scalar), pool, l0, through);
    CHECK(kvtest::relative_error(staged, all_direct) < 1e-5f);
  }
}

TEST_CASE("an attend call refuses a plan that does not fit, holding nothing", "[attention][attend_call]") {
  std::mt19937 rng(3);
  ThreadPool pool(1);
  const Trial t = random_trial(rng, 300);
  std::vector<float> out(t.q.size());
  AttendCall call(8u << 20);
  FakeAccess access(t.kv);
  SelectionPlan plan;
  plan.total_pages = static_cast<int>(t.kv.views[0].size()) + 1;
  plan.heads.resize(t.kv.views.size());
  AttendCallArgs args = args_for(t, out.data());
  args.plan = &plan;
  CHECK_THROWS_WITH(call.run(page_kernels(Isa::Scalar), pool, access, args), Catch::Contains("plan"));
  plan.total_pages -= 1;
  for (auto& head : plan.heads) head.pages = {static_cast<int>(t.kv.views[0].size())};
  CHECK_THROWS_WITH(call.run(page_kernels(Isa::Scalar), pool, access, args), Catch::Contains("is not one of"));
  CHECK(access.acquires == 0);
  // Decode-only options on a prefill call.
  std::vector<std::vector<float>> mass;
  args.plan = nullptr;
  args.page_mass = &mass;
  args.n_queries = 2;
  std::vector<float> two(2 * t.q.size()), q2(2 * t.q.size());
  args.q = q2.data();
  args.out = two.data();
  CHECK_THROWS_WITH(call.run(page_kernels(Isa::Scalar), pool, access, args), Catch::Contains("decode"));
  CHECK(access.held == 0);
}
