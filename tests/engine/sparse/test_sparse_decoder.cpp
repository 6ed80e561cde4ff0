#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "model/synthetic.h"
#include "engine/sparse/sparse_setup.h"
#include "runtime/error.h"
#include "sparse/sparse_decoder.h"
#include "int_twin.h"
#include "test_support.h"

using namespace kv;

namespace {

struct Recorder : Telemetry {
  std::vector<SelectionEvent> selections;
  std::vector<BudgetChange> budgets;
  std::vector<MemoryEvent> memory;
  void on_memory_event(const MemoryEvent& e) override { memory.push_back(e); }
  void on_page_sealed(const PageSealed&) override {}
  void on_nan_inf(int, std::uint64_t) override {}
  void on_kernel(KernelKind, Isa) override {}
  void on_ops(Phase, const OpCounts&) override {}
  void on_selection(const SelectionEvent& e) override { selections.push_back(e); }
  void on_budget_change(const BudgetChange& c) override { budgets.push_back(c); }
};

using kvtest::policy;
using kvtest::Setup;

}  // namespace

TEST_CASE("Page masses of a full attention add up to the group size", "[sparse]") {
  Setup s(1024);
  const auto q = s.next_query();
  std::vector<float> out(q.size());
  std::vector<std::vector<float>> mass;
  s.cache.attend(s.seq, 0, q.data(), 1, out.data(), {nullptr, &mass});
  const int group = s.preset.q_heads / s.preset.kv_heads;
  for (const auto& head : mass) CHECK(std::accumulate(head.begin(), head.end(), 0.0) == Approx(group).epsilon(1e-4));
}

TEST_CASE("A full-budget sparse decoder equals plain attention", "[sparse]") {
  Setup s(1000);
  SparseDecoder decoder(s.cache, policy(Selector::Hybrid, 1.0f));
  const auto q = s.next_query();
  std::vector<float> dense(q.size()), sparse(q.size());
  s.cache.attend(s.seq, 0, q.data(), 1, dense.data());
  decoder.attend(s.seq, 0, q.data(), sparse.data());
  CHECK(std::memcmp(dense.data(), sparse.data(), dense.size() * sizeof(float)) == 0);
  for (const auto& head : decoder.last_plan().heads) CHECK(head.pages.size() == static_cast<std::size_t>(decoder.last_plan().total_pages));
}

TEST_CASE("H2O keeps what attention used, tightening is reported", "[sparse]") {
  auto recall_after_tightening = [](Selector selector, Recorder& recorder) {
    Setup s(4096);
    SparseDecoder decoder(s.cache, policy(selector, 1.0f), &recorder);
    std::vector<float> out(static_cast<std::size_t>(s.preset.q_heads) * s.preset.head_dim);
    for (int step = 0; step < 4; ++step) {  // warm-up at full budget: accumulate attention
      const auto q = s.next_query();
      decoder.attend(s.seq, 0, q.data(), out.data());
      decoder.end_step();
    }
    decoder.set_budget(0.125f, 0);
    const auto q = s.next_query();
    decoder.attend(s.seq, 0, q.data(), out.data());
    // Exact attention mass that the kept pages hold (reference: full attention's page masses).
    std::vector<std::vector<float>> full;
    s.cache.attend(s.seq, 0, q.data(), 1, out.data(), {nullptr, &full});
    double kept = 0.0, total = 0.0;
    for (std::size_t h = 0; h < full.size(); ++h) {
      for (float m : full[h]) total += m;
      for (int p : decoder.last_plan().heads[h].pages) kept += full[h][static_cast<std::size_t>(p)];
    }
    // The share of context tokens left out, from the sink's selection events (mean over steps and heads).
    double dropped = 0.0;
    int heads = 0;
    for (const SelectionEvent& e : recorder.selections) {
      for (int tokens : e.kept_tokens) {
        dropped += 1.0 - static_cast<double>(tokens) / e.context_tokens;
        ++heads;
      }
    }
    return std::pair{kept / total, dropped / heads};
  };
  Recorder h2o_events, recency_events;
  const auto [h2o_recall, h2o_drop] = recall_after_tightening(Selector::H2O, h2o_events);
  const auto [recency_recall, recency_drop] = recall_after_tightening(Selector::Recency, recency_events);
  CAPTURE(h2o_recall, recency_recall);
  // Heavy hitters are hashed over the context, so the middle pages hold little mass each;
  // what H2O keeps must still beat the most recent pages.
  CHECK(h2o_recall > recency_recall + 0.01);
  CHECK(h2o_drop > 0.1);
  REQUIRE(h2o_events.budgets.size() == 1);
  CHECK(h2o_events.budgets[0].budget == 0.125f);
  CHECK(h2o_events.budgets[0].step == 4);
  REQUIRE(h2o_events.selections.size() == 5);
  const SelectionEvent& last = h2o_events.selections.back();
  CHECK(last.step == 4);
  CHECK(last.budget_pages == 9);  // ceil(0.125 * 65 pages)
  for (int kept : last.kept_tokens) CHECK(kept < last.context_tokens);
  // The histogram counts every middle page of every kv head once.
  int binned = 0;
  for (int count : last.score_histogram) binned += count;
  CHECK(last.score_histogram.size() == 16u);
  CHECK(binned == static_cast<int>(last.kept_tokens.size()) * (65 - 4));  // 65 pages; forced: the sink page and 3 window pages
  KVCache small(Setup::cache_config({1, 2, 1, 64, 128}));
  SparseDecoder decoder(small, policy(Selector::H2O, 0.5f));
  CHECK_THROWS_WITH(decoder.set_budget(0.5f, 3), Catch::Contains("exactly one"));
}

TEST_CASE("Sparse prefill: a covering budget equals dense prefill, a tight one keeps the chunk causal", "[sparse]") {
  Setup s(1024);
  const int n = 40, dim = s.preset.head_dim;
  const int start = s.cache.length(s.seq, 0);
  std::vector<float> k(static_cast<std::size_t>(n) * s.preset.kv_heads * dim), v(k.size());
  std::vector<float> q(static_cast<std::size_t>(n) * s.preset.q_heads * dim);
  for (int t = 0; t < n; ++t) {
    for (int h = 0; h < s.preset.kv_heads; ++h) {
      s.model.key(4, h, start + t, k.data() + (static_cast<std::size_t>(t) * s.preset.kv_heads + h) * dim);
      s.model.value(4, h, start + t, v.data() + (static_cast<std::size_t>(t) * s.preset.kv_heads + h) * dim);
    }
    for (int h = 0; h < s.preset.q_heads; ++h) {
      s.model.query(4, h, start + t, q.data() + (static_cast<std::size_t>(t) * s.preset.q_heads + h) * dim);
    }
  }
  s.cache.append(s.seq, 0, k.data(), v.data(), n);
  std::vector<float> dense(q.size()), covering(q.size()), tight(q.size());
  s.cache.attend(s.seq, 0, q.data(), n, dense.data());
  SparsePolicy all = policy(Selector::Quest, 1.0f);
  all.sparse_prefill = true;
  SparseDecoder full_budget(s.cache, all);
  full_budget.prefill(s.seq, 0, q.data(), n, covering.data());
  CHECK(std::memcmp(dense.data(), covering.data(), dense.size() * sizeof(float)) == 0);
  SparsePolicy some = policy(Selector::Quest, 0.25f);
  some.sparse_prefill = true;
  SparseDecoder quarter(s.cache, some);
  quarter.prefill(s.seq, 0, q.data(), n, tight.data());
  const auto& pages = quarter.last_plan().heads[0].pages;
  CHECK(pages.size() < 17u);  // 1064 tokens = 17 pages; a quarter of them plus the forced ones
  CHECK(pages.back() == 16);  // the chunk's own page is attended
  for (float x : tight) REQUIRE(std::isfinite(x));
  // The last query through the prefill path equals a decode over the same pages.
  const std::size_t last = static_cast<std::size_t>(n - 1) * s.preset.q_heads * dim;
  std::vector<float> decode(static_cast<std::size_t>(s.preset.q_heads) * dim);
  s.cache.attend(s.seq, 0, q.data() + last, 1, decode.data(), {&quarter.last_plan()});
  const std::vector<float> tight_last(tight.begin() + static_cast<long>(last), tight.end());
  // Decode takes integer dot products where the kernel path has them for the cache's formats
  // (int_dot.h: q8 K on Arm's dotprod and i8mm), prefill never does.
  const bool integer = kvtest::integer_decode(s.cache.isa(), s.cache.page_views(s.seq, 0));
  CHECK(kvtest::relative_error(tight_last, decode) < (integer ? kvtest::kTwinTolerance : 1e-4f));
}

TEST_CASE("memory danger's budget request comes out of the call that entered it: one decision, one event", "[sparse][memory]") {
  // No L2 tier and an L1 cap far below the context: appending enters danger.
  CacheConfig config;
  config.geometry = {1, 4, 2, 64, 4096};
  config.k_format = config.v_format = Format::Q8;
  config.page_tokens = 64;
  config.threads = 1;
  config.memory.l1_bytes = 64 * 1024;
  Recorder events;  // the cache's and the decoder's: every memory event and budget change
  KVCache cache(config, &events);
  SparseDecoder decoder(cache, policy(Selector::Quest, 0.5f), &events);
  const SeqId seq = cache.create_sequence();
  constexpr int kTokens = 1024;
  const auto k = kvtest::random_keys(kTokens, 2, 64, 3);
  const auto v = kvtest::random_values(static_cast<std::size_t>(kTokens) * 2 * 64, 4);
  const CacheOutcome appended = cache.append(seq, 0, k.data(), v.data(), kTokens);
  REQUIRE(cache.stats().memory.level == PressureLevel::Danger);
  CHECK(appended.budget_requests == 1);
  // The cache decides nothing above it: the budget is the caller's to apply.
  CHECK(decoder.policy().budget == 0.5f);
  decoder.apply(appended);
  CHECK(decoder.policy().budget == 0.25f);
  REQUIRE(events.budgets.size() == 1);
  CHECK(events.budgets[0].from_budget == 0.5f);
  CHECK(events.budgets[0].budget == 0.25f);
  // One change is one event: the budget change. Danger's memory events (the level, the long
  // tail's requantization, the overflow) say nothing of the budget.
  REQUIRE_FALSE(events.memory.empty());
  for (const MemoryEvent& e : events.memory) CHECK(e.reason.find("budget") == std::string::npos);
  // Still in danger: the decoder's steps and a further append bring no new request.
  const auto q = kvtest::random_values(4 * 64, 5);
  std::vector<float> out(q.size());
  for (int step = 0; step < 2; ++step) decoder.attend(seq, 0, q.data(), out.data());
  const auto one_k = kvtest::random_keys(1, 2, 64, 6);
  const auto one_v = kvtest::random_values(2 * 64, 7);
  CHECK(cache.append(seq, 0, one_k.data(), one_v.data(), 1).budget_requests == 0);
  CHECK(decoder.policy().budget == 0.25f);
  CHECK(events.budgets.size() == 1);
}

TEST_CASE("A decoder told a sequence's images keeps each image's own pages under any selector", "[sparse]") {
  Setup s(1024);  // 16 pages of 64 tokens; the next token opens a 17th
  const std::vector<ImagePages> images{{2, 6}, {8, 12}};
  SparsePolicy p = policy(Selector::H2O, 0.2f);  // a selector that reads no query bound of its own
  p.visual = {0.25f, 1};
  SparseDecoder decoder(s.cache, p);
  decoder.set_images(s.seq, images);
  const auto q = s.next_query();
  std::vector<float> out(q.size());
  decoder.attend(s.seq, 0, q.data(), out.data());
  const SelectionPlan& plan = decoder.last_plan();
  REQUIRE(plan.visual_budget_pages == 2);
  for (const HeadSelection& head : plan.heads) {
    for (const ImagePages& image : images) {
      int kept = 0;
      for (std::size_t i = 0; i < head.pages.size(); ++i) {
        if (head.pages[i] < image.first || head.pages[i] >= image.last) continue;
        ++kept;
        CHECK(head.reasons[i] == KeepReason::Visual);
      }
      CHECK(kept == 1);
    }
  }
  // Forgotten, the sequence's pages are all text again.
  decoder.forget(s.seq);
  const auto q2 = s.next_query();
  decoder.attend(s.seq, 0, q2.data(), out.data());
  CHECK(decoder.last_plan().visual.empty());
  // A budget that keeps fewer than min_pages_per_image pages of an image is refused, named.
  SparsePolicy strict = p;
  strict.visual = {0.25f, 2};
  SparseDecoder refusing(s.cache, strict);
  try {
    refusing.set_images(s.seq, images);
    FAIL("not refused");
  } catch (const InputError& e) {
    CHECK(e.field() == "visual.budget");
  }
}
