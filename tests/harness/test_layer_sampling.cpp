// The conversion between a case's executed layers and its whole model (layer_sampling.h).
#include <catch2/catch.hpp>

#include <vector>

#include "layer_sampling.h"

using namespace kvbench;

TEST_CASE("sampled layers are the middles of equal slices, and the conversions invert within rounding", "[harness]") {
  CHECK(LayerSampling::of(32, 1).executed_layers() == std::vector<int>{16});
  CHECK(LayerSampling::of(32, 2).executed_layers() == std::vector<int>{8, 24});
  CHECK(LayerSampling::of(32, 4).executed_layers() == std::vector<int>{4, 12, 20, 28});
  CHECK(LayerSampling::of(6, 64).samples == 6);  // never more than the model has
  CHECK(LayerSampling::all(6).executed_layers() == std::vector<int>{0, 1, 2, 3, 4, 5});

  const LayerSampling s = LayerSampling::of(32, 3);
  CHECK(s.scale() == Approx(32.0 / 3.0));
  // A budget's share rounds down and the whole-model figure up: the share of a whole-model
  // figure never exceeds it, and scaling a share back never loses a byte.
  for (std::uint64_t whole : {0ULL, 1ULL, 1000ULL, 768ULL << 20, (2ULL << 30) + 7}) {
    const std::size_t share = s.executed_share(whole);
    CHECK(static_cast<double>(share) <= static_cast<double>(whole) * 3 / 32);
    CHECK(s.whole_bytes(share) <= whole + 11);  // under one executed byte lost: ceil(32 / 3) whole bytes at most
    CHECK(s.executed_share(s.whole_bytes(share)) >= share);
  }
  CHECK(s.whole_bytes(3) == 32);
  CHECK(s.whole_bytes(4) == 43);  // 42.67 up
  CHECK(LayerSampling::all(12).executed_share(1000) == 1000);
  CHECK(LayerSampling::all(12).whole_bytes(1000) == 1000);
}
