#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "attention/attention_ref.h"
#include "kv_cache.h"
#include "model/synthetic.h"
#include "runtime/error.h"
#include "sparse/quest.h"
#include "sparse/selection.h"
#include "int_twin.h"
#include "test_support.h"

using namespace kv;

namespace {

CacheConfig q4_cache(const ModelGeometry& g) {
  CacheConfig c;
  c.geometry = g;
  c.k_format = Format::Q4;
  c.v_format = Format::Q4;
  c.page_tokens = 16;
  c.residual_tokens = 8;
  c.threads = 2;
  return c;
}

// A new sequence of 1000 random tokens (2 kv heads x 64 channels), from seeds seed and seed + 1.
SeqId filled(KVCache& cache, std::uint32_t seed) {
  const SeqId seq = cache.create_sequence();
  const auto k = kvtest::random_keys(1000, 2, 64, seed);
  const auto v = kvtest::random_values(1000 * 2 * 64, seed + 1);
  cache.append(seq, 0, k.data(), v.data(), 1000);
  return seq;
}

SparsePolicy with_budget(Selector s, float budget) {
  SparsePolicy p;
  p.selector = s;
  p.budget = budget;
  p.sinks = 4;
  p.window = 64;
  return p;
}

// A Quest plan for one decode query over layer 0 of a filled cache (1000 tokens, pages of 16, 2
// kv heads, 8 q heads).
SelectionPlan quest_plan(const std::vector<std::vector<PageView>>& views, const std::vector<float>& q, float budget) {
  const auto bounds = quest_bounds(views, q.data(), 8);
  return plan_selection(with_budget(Selector::Quest, budget), {1000, 16, 2, &bounds, nullptr});
}

}  // namespace

TEST_CASE("A plan that covers the context reproduces full attention", "[sparse]") {
  KVCache cache(q4_cache({1, 8, 2, 64, 4096}));
  const SeqId seq = filled(cache, 1);
  const auto q = kvtest::random_values(8 * 64, 3);
  std::vector<float> dense(q.size()), sparse(q.size());
  cache.attend(seq, 0, q.data(), 1, dense.data());
  const auto views = cache.page_views(seq, 0);
  const auto bounds = quest_bounds(views, q.data(), 8);
  const std::vector<std::vector<float>> acc(2, std::vector<float>(views[0].size(), 0.0f));
  for (Selector s : {Selector::Quest, Selector::H2O, Selector::Recency, Selector::Hybrid}) {
    const SelectionPlan plan = plan_selection(with_budget(s, 1.0f), {1000, 16, 2, &bounds, &acc});
    cache.attend(seq, 0, q.data(), 1, sparse.data(), {&plan});
    CAPTURE(selector_name(s));
    CHECK(std::memcmp(dense.data(), sparse.data(), dense.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("Attention over a plan equals the reference over the selected pages", "[sparse]") {
  KVCache cache(q4_cache({1, 8, 2, 64, 4096}));
  const SeqId seq = filled(cache, 11);
  const auto q = kvtest::random_values(8 * 64, 13);
  const auto views = cache.page_views(seq, 0);
  const SelectionPlan plan = quest_plan(views, q, 0.2f);
  std::vector<float> out(q.size());
  cache.attend(seq, 0, q.data(), 1, out.data(), {&plan});
  // Reference: dense attention over exactly the kept pages of each head.
  const AttentionShape one_head{4, 1, 64, cache.config().softmax_scale};
  for (int h = 0; h < 2; ++h) {
    std::vector<std::vector<PageView>> kept(1);
    for (int p : plan.heads[static_cast<std::size_t>(h)].pages) kept[0].push_back(views[static_cast<std::size_t>(h)][static_cast<std::size_t>(p)]);
    std::vector<float> want(4 * 64);
    float tolerance = 2e-5f;
    if (kvtest::integer_decode(cache.isa(), kept)) {  // q4 integer dot products (int_dot.h)
      want = kvtest::twin_decode(cache.isa(), one_head, kept, q.data() + h * 4 * 64);
      tolerance = kvtest::kTwinTolerance;
    } else {
      const DenseKV dense = gather_pages_ref(one_head, kept);
      attention_ref(one_head, q.data() + h * 4 * 64, 1, dense.k.data(), dense.v.data(), dense.ctx, want.data());
    }
    const std::vector<float> got(out.begin() + h * 4 * 64, out.begin() + (h + 1) * 4 * 64);
    CAPTURE(h);
    CHECK(kvtest::relative_error(got, want) < tolerance);
  }
  SelectionPlan wrong = plan;
  wrong.total_pages += 1;
  CHECK_THROWS_WITH(cache.attend(seq, 0, q.data(), 1, out.data(), {&wrong}), Catch::Contains("planned for"));
}

TEST_CASE("Quest and hybrid keep planted needles at a 10% budget, window does not", "[sparse]") {
  ThreadPool pool(2);
  const SyntheticPreset& preset = find_synthetic_preset("qwen-0.5b-gqa", "test");
  const int ctx = 16384;
  SyntheticConfig config;
  config.calibration_ctx = ctx;
  config.needles = {2800, 8400, 13200};
  SyntheticModel model(preset, config, {6}, ctx + 1, pool);
  CacheConfig c = q4_cache(model.geometry());
  c.page_tokens = 64;
  KVCache cache(c);
  const SeqId seq = cache.create_sequence();
  StepBuffers buffers;
  run_step(model, cache, seq, nullptr, ctx, 0, buffers, StepAttention::AppendOnly);
  const auto views = cache.page_views(seq, 0);
  const std::vector<std::vector<float>> acc(static_cast<std::size_t>(preset.kv_heads), std::vector<float>(views[0].size(), 0.0f));
  std::vector<float> q(static_cast<std::size_t>(preset.q_heads) * preset.head_dim);
  for (std::size_t n = 0; n < config.needles.size(); ++n) {
    model.ask_needle(static_cast<int>(n));
    for (int h = 0; h < preset.q_heads; ++h) model.query(6, h, ctx - 1, q.data() + static_cast<std::size_t>(h) * preset.head_dim);
    const auto bounds = quest_bounds(views, q.data(), preset.q_heads);
    const int needle_page = config.needles[n] / 64;
    auto kept = [&](const SparsePolicy& p) {
      const SelectionPlan plan = plan_selection(p, {ctx, 64, preset.kv_heads, &bounds, &acc});
      // The kv heads that serve a retrieval head are the ones asked (streaming heads ignore a question).
      bool all = true;
      int asked = 0;
      for (int h = 0; h < preset.kv_heads; ++h) {
        if (!model.answers_questions(0, h)) continue;
        ++asked;
        const auto& pages = plan.heads[static_cast<std::size_t>(h)].pages;
        all = all && std::count(pages.begin(), pages.end(), needle_page) == 1;
      }
      return asked > 0 && all;
    };
    SparsePolicy window;
    window.selector = Selector::Window;
    window.window = 256;
    CAPTURE(n);
    CHECK(kept(with_budget(Selector::Quest, 0.10f)));
    CHECK(kept(with_budget(Selector::Hybrid, 0.10f)));
    CHECK_FALSE(kept(window));
  }
}

TEST_CASE("Compensation lowers the error when much attention mass is dropped", "[sparse]") {
  // Flat attention (small keys): a window of 64 out of 2000 tokens drops ~97% of the mass.
  KVCache cache(q4_cache({1, 8, 2, 64, 4096}));
  const SeqId seq = cache.create_sequence();
  auto k = kvtest::random_values(2000 * 2 * 64, 21, 0.3f);
  auto v = kvtest::random_values(2000 * 2 * 64, 22);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] += (i % 64 < 8) ? 2.0f : 0.0f;  // a shared offset to recover
  cache.append(seq, 0, k.data(), v.data(), 2000);
  const auto q = kvtest::random_values(8 * 64, 23);
  std::vector<float> full(q.size()), plain(q.size()), compensated(q.size());
  cache.attend(seq, 0, q.data(), 1, full.data());
  SparsePolicy window;
  window.selector = Selector::Window;
  window.window = 64;
  const SelectionPlan plan = plan_selection(window, {2000, 16, 2, nullptr, nullptr});
  cache.attend(seq, 0, q.data(), 1, plain.data(), {&plan});
  AttendOptions options;
  options.plan = &plan;
  options.compensate = true;
  cache.attend(seq, 0, q.data(), 1, compensated.data(), options);
  const float error_plain = kvtest::relative_error(plain, full);
  const float error_compensated = kvtest::relative_error(compensated, full);
  CAPTURE(error_plain, error_compensated);
  CHECK(error_compensated < 0.5f * error_plain);
}

TEST_CASE("A plan's pages viewed on their own attend like the same pages picked from all views", "[sparse]") {
  CacheConfig config = q4_cache({1, 8, 2, 64, 4096});
  config.residual_tokens = 40;  // residual pages among the planned ones
  KVCache cache(config);
  const SeqId seq = filled(cache, 51);
  const auto q = kvtest::random_values(8 * 64, 53);
  const auto views = cache.page_views(seq, 0);
  for (float budget : {0.2f, 0.5f}) {
    const SelectionPlan plan = quest_plan(views, q, budget);
    std::vector<float> own(q.size()), picked(q.size());
    std::vector<std::vector<float>> own_mass, picked_mass;
    AttendOptions options;
    options.plan = &plan;
    options.page_mass = &own_mass;
    cache.attend(seq, 0, q.data(), 1, own.data(), options);
    options.views = &views;
    options.page_mass = &picked_mass;
    cache.attend(seq, 0, q.data(), 1, picked.data(), options);
    CAPTURE(budget);
    CHECK(std::memcmp(own.data(), picked.data(), own.size() * sizeof(float)) == 0);
    CHECK(own_mass == picked_mass);
  }
  // A plan for another sequence length, or naming a page the sequence lacks, is refused.
  SelectionPlan stale = quest_plan(views, q, 0.2f);
  stale.heads[1].pages.back() = 10000;
  std::vector<float> out(q.size());
  CHECK_THROWS_AS(cache.attend(seq, 0, q.data(), 1, out.data(), {&stale}), InputError);
  stale.total_pages += 1;
  CHECK_THROWS_AS(cache.attend(seq, 0, q.data(), 1, out.data(), {&stale}), InputError);
}

TEST_CASE("A decode step adds each kept page's attention mass to the selector's importance, once", "[sparse]") {
  CacheConfig config = q4_cache({1, 8, 2, 64, 4096});
  config.residual_tokens = 40;  // the residual page takes its mass too
  KVCache cache(config);
  const SeqId seq = filled(cache, 51);
  const auto q = kvtest::random_values(8 * 64, 55);
  const auto views = cache.page_views(seq, 0);
  const SelectionPlan plan = quest_plan(views, q, 0.3f);
  std::vector<float> out(q.size());
  std::vector<std::vector<float>> mass;
  AttendOptions with_mass;
  with_mass.plan = &plan;
  with_mass.page_mass = &mass;
  cache.attend(seq, 0, q.data(), 1, out.data(), with_mass);

  std::vector<std::vector<float>> importance(2, std::vector<float>(views[0].size(), 0.5f));
  AttendOptions with_importance;
  with_importance.plan = &plan;
  with_importance.importance = &importance;
  cache.attend(seq, 0, q.data(), 1, out.data(), with_importance);
  for (std::size_t h = 0; h < 2; ++h) {
    std::vector<float> expected(views[h].size(), 0.5f);
    const auto& kept = plan.heads[h].pages;
    for (std::size_t i = 0; i < kept.size(); ++i) expected[static_cast<std::size_t>(kept[i])] += mass[h][i];
    CAPTURE(h);
    CHECK(importance[h] == expected);
  }
  // Without a slot for every page, or on a prefill call, importance is refused before any work.
  std::vector<std::vector<float>> short_rows(2, std::vector<float>(views[0].size() - 1, 0.0f));
  with_importance.importance = &short_rows;
  CHECK_THROWS_WITH(cache.attend(seq, 0, q.data(), 1, out.data(), with_importance), Catch::Contains("importance"));
  CHECK(short_rows == std::vector<std::vector<float>>(2, std::vector<float>(views[0].size() - 1, 0.0f)));
  AttendOptions prefill;
  prefill.importance = &importance;
  std::vector<float> two(2 * q.size());
  const auto q2 = kvtest::random_values(2 * 8 * 64, 56);
  CHECK_THROWS_WITH(cache.attend(seq, 0, q2.data(), 2, two.data(), prefill), Catch::Contains("decode step"));
}
