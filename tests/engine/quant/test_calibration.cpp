#include <catch2/catch.hpp>

#include <vector>

#include "quant/calibration.h"
#include "quant/quantizer.h"
#include "test_support.h"

using namespace kv;

namespace {

struct Page {
  std::vector<float> k, v;
  PageStats stats;
};

Page make_page(int tokens, int dim, std::uint32_t seed, float v_gain = 1.0f, float k_gain = 1.0f) {
  Page p;
  p.k = kvtest::random_values(static_cast<std::size_t>(tokens) * dim, seed);
  p.v = kvtest::random_values(static_cast<std::size_t>(tokens) * dim, seed + 7);
  for (float& x : p.k) x *= k_gain;
  for (float& x : p.v) x *= v_gain;
  const PageLayout layout = PageLayout::make({tokens, dim, Format::Q4, Format::Q4, 32, false});
  std::vector<std::byte> bytes(layout.bytes);
  quantize_page(layout, p.k.data(), p.v.data(), tokens, bytes.data(), &p.stats);
  return p;
}

}  // namespace

TEST_CASE("The first page has no reference, the same page again has no drift", "[quant]") {
  Calibration calibration;
  const Page page = make_page(64, 64, 1);
  const PageHealth first = calibration.observe(page.stats, page.k.data(), page.v.data(), 64, 32, true);
  CHECK_FALSE(first.has_reference);
  CHECK(first.scale_drift_max == 0.0f);
  const PageHealth again = calibration.observe(page.stats, page.k.data(), page.v.data(), 64, 32, false);
  CHECK(again.has_reference);
  CHECK(again.scale_drift_mean == Approx(0.0f).margin(1e-6));
  CHECK(again.clip_ratio == 0.0f);
}

TEST_CASE("Scaled values show as drift and clipping against the prefill reference", "[quant]") {
  Calibration calibration;
  for (std::uint32_t s = 0; s < 4; ++s) {
    const Page page = make_page(64, 64, 10 + s);
    calibration.observe(page.stats, page.k.data(), page.v.data(), 64, 32, true);
  }
  CHECK(calibration.reference_pages() == 4);
  const Page same = make_page(64, 64, 20);
  const PageHealth steady = calibration.observe(same.stats, same.k.data(), same.v.data(), 64, 32, false);
  const Page louder = make_page(64, 64, 21, 3.0f, 3.0f);
  const PageHealth drifted = calibration.observe(louder.stats, louder.k.data(), louder.v.data(), 64, 32, false);
  CHECK(steady.scale_drift_mean < 0.3f);
  CHECK(drifted.scale_drift_mean > 1.5f);   // ranges tripled: relative change near 2
  CHECK(drifted.scale_drift_max >= drifted.scale_drift_mean);
  CHECK(drifted.clip_ratio > steady.clip_ratio);
  CHECK(drifted.clip_ratio > 0.1f);
  // Decode pages do not move the reference.
  CHECK(calibration.reference_pages() == 4);
}

TEST_CASE("Outlier channels are counted against the page median", "[quant]") {
  Calibration calibration(5.0f);
  Page page = make_page(32, 64, 3);
  for (int c : {5, 17, 40}) {
    page.stats.k_max[c] = 100.0f;
  }
  const PageHealth health = calibration.observe(page.stats, page.k.data(), page.v.data(), 32, 32, true);
  CHECK(health.outlier_channel_ratio == Approx(3.0 / 64.0));
}
