// The quality monitor: sampled decode steps (every sample_every-th) are checked once against
// exact attention over exact K/V; a window policy that drops heavy hitters shows recall well
// below its oracle ceiling and logs its dropped critical tokens, a full policy holds all the mass.
#include <catch2/catch.hpp>

#include <vector>

#include "engine/sparse/sparse_setup.h"
#include "selection_quality.h"
#include "sparse/sparse_decoder.h"

using namespace kv;
using kvbench::QualityMonitor;
using kvtest::Setup;

TEST_CASE("sampled steps measure recall against exact attention and log dropped critical tokens", "[sparse][quality]") {
  Setup s(2048);
  struct Drops : kv::Telemetry {
    void on_page_sealed(const PageSealed&) override {}
    void on_nan_inf(int, std::uint64_t) override {}
    void on_kernel(KernelKind, Isa) override {}
    void on_ops(Phase, const OpCounts&) override {}
    std::vector<TokenDropped> drops;
    std::vector<SelectionQuality> quality;
    void on_token_dropped(const TokenDropped& d) override { drops.push_back(d); }
    void on_selection_quality(const SelectionQuality& q) override { quality.push_back(q); }
  } drops;
  SparsePolicy window;
  window.selector = Selector::Window;
  window.window = 128;
  window.sample_every = 2;
  SparseDecoder decoder(s.cache, window, &drops);
  QualityMonitor monitor(s.model, window, &drops);
  std::vector<float> out(static_cast<std::size_t>(s.preset.q_heads) * s.preset.head_dim);
  for (int step = 0; step < 4; ++step) {
    const auto q = s.next_query();
    decoder.attend(s.seq, 0, q.data(), out.data());
    CHECK(monitor.check(s.cache, decoder, q.data(), out.data()).has_value() == (step % 2 == 0));
    decoder.end_step();
  }
  REQUIRE(drops.quality.size() == 2);  // steps 0 and 2
  // Window keeps sinks (~0.25) and the window (~0.35 at 128+ tokens); it drops heavy hitters.
  const double recall = (drops.quality[0].attn_mass_recall + drops.quality[1].attn_mass_recall) / 2;
  CHECK(recall > 0.3);
  CHECK(recall < 0.9);
  CHECK(drops.quality[0].critical_miss_rate + drops.quality[1].critical_miss_rate > 0.0);
  // The oracle ceiling: as many pages, the heaviest by exact mass. No choice holds more, and
  // the window's pages are not the heaviest ones here (it drops heavy hitters).
  for (const SelectionQuality& quality : drops.quality) {
    // The oracle's pages drop fewer of the critical tokens than the window's, and some may
    // still not fit: it is a floor, not zero.
    CHECK(quality.oracle_critical_miss_rate >= 0.0);
    CHECK(quality.oracle_critical_miss_rate < quality.critical_miss_rate);
    CHECK(quality.oracle_mass_recall >= quality.attn_mass_recall - 1e-9);
    CHECK(quality.oracle_mass_recall > quality.attn_mass_recall + 0.05);
    CHECK(quality.oracle_mass_recall < 1.0);
  }
  REQUIRE(!drops.drops.empty());
  for (const TokenDropped& d : drops.drops) {
    CHECK(d.position >= 4);
    CHECK(d.position < 2048 - 128);
    CHECK(d.weight > 0.0f);
  }
  SparsePolicy full;
  SparseDecoder exact_full(s.cache, full);
  QualityMonitor full_monitor(s.model, full, nullptr);
  CHECK_FALSE(full_monitor.check(s.cache, exact_full, out.data(), out.data()));  // no decode step yet
  const auto q = s.next_query();
  exact_full.attend(s.seq, 0, q.data(), out.data());
  const auto checked = full_monitor.check(s.cache, exact_full, q.data(), out.data());
  REQUIRE(checked);
  CHECK_FALSE(full_monitor.check(s.cache, exact_full, q.data(), out.data()));  // one check per decode step
  CHECK(checked->attn_mass_recall == Approx(1.0));
  CHECK(checked->oracle_mass_recall == Approx(1.0));
  CHECK(checked->critical_miss_rate == 0.0);
  CHECK(checked->oracle_critical_miss_rate == 0.0);
}


TEST_CASE("image tokens' figures: their mass kept against the oracle's, and the image tokens dropped", "[sparse][quality]") {
  Setup s(1024, {{128, 384}, {512, 768}});  // pages [2, 6) and [8, 12) of 64 tokens
  const std::vector<ImagePages> images{{2, 6}, {8, 12}};
  std::vector<float> out(static_cast<std::size_t>(s.preset.q_heads) * s.preset.head_dim);
  const auto checked = [&](const SparsePolicy& policy, bool hand_images) {
    SparseDecoder decoder(s.cache, policy);
    if (hand_images) decoder.set_images(s.seq, images);
    QualityMonitor monitor(s.model, policy, nullptr);
    const auto q = s.next_query();
    decoder.attend(s.seq, 0, q.data(), out.data());
    const auto quality = monitor.check(s.cache, decoder, q.data(), out.data());
    REQUIRE(quality);
    REQUIRE(quality->has_images);
    CHECK(quality->visual_oracle_mass_recall >= quality->visual_mass_recall - 1e-9);
    CHECK(quality->visual_oracle_mass_recall <= 1.0 + 1e-9);
    return *quality;
  };
  // Every page: nothing of the images is lost.
  const SelectionQuality full = checked(SparsePolicy{}, false);
  CHECK(full.visual_mass_recall == Approx(1.0));
  CHECK(full.visual_token_drop == 0.0);
  // A visual budget of a quarter: one page of each image's four, every kv head; 3/4 of the
  // image tokens dropped, whatever the scores.
  SparsePolicy quarter = kvtest::policy(Selector::Hybrid, 0.1f);
  quarter.visual = {0.25f, 1};
  const SelectionQuality visual = checked(quarter, true);
  CHECK(visual.visual_token_drop == Approx(0.75));
  CHECK(visual.visual_mass_recall > 0.0);
  CHECK(visual.visual_mass_recall < 1.0);
  // The whole of each image.
  quarter.visual = {1.0f, 1};
  const SelectionQuality whole = checked(quarter, true);
  CHECK(whole.visual_token_drop == 0.0);
  CHECK(whole.visual_mass_recall == Approx(1.0));
  CHECK(whole.visual_oracle_mass_recall == Approx(1.0));
  CHECK(full.visual_oracle_mass_recall == Approx(1.0));
  // A text-only context states none of them.
  Setup text(1024);
  SparseDecoder decoder(text.cache, SparsePolicy{});
  QualityMonitor monitor(text.model, SparsePolicy{}, nullptr);
  const auto q = text.next_query();
  decoder.attend(text.seq, 0, q.data(), out.data());
  const auto quality = monitor.check(text.cache, decoder, q.data(), out.data());
  REQUIRE(quality);
  CHECK_FALSE(quality->has_images);
}
