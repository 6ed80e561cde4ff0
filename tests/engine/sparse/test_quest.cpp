#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "quant/quantizer.h"
#include "sparse/quest.h"
#include "test_support.h"

using namespace kv;

TEST_CASE("The Quest bound is never below the true max q.k over the stored keys", "[sparse]") {
  std::uint32_t seed = 300;
  for (Format f : kAllFormats) {
    for (int dim : {8, 64, 128}) {
      for (int trial = 0; trial < 20; ++trial) {
        const int tokens = 1 + static_cast<int>(seed % 64);
        const PageLayout layout = PageLayout::make({64, dim, f, f, 32, false});
        std::vector<std::byte> page(layout.bytes);
        const auto k = kvtest::random_keys(tokens, 1, dim, seed++);
        const auto v = kvtest::random_values(static_cast<std::size_t>(tokens) * dim, seed++);
        quantize_page(layout, k.data(), v.data(), tokens, page.data(), nullptr);
        const auto q = kvtest::random_values(static_cast<std::size_t>(dim), seed++, 3.0f);
        const PageView view{&layout, page.data(), tokens};
        std::vector<float> kh(k.size()), vh(v.size());
        dequantize_page_ref(view, kh.data(), vh.data());
        double best = -INFINITY;
        for (int t = 0; t < tokens; ++t) {
          double dot = 0.0;
          for (int c = 0; c < dim; ++c) dot += static_cast<double>(q[c]) * kh[static_cast<std::size_t>(t * dim + c)];
          best = std::max(best, dot);
        }
        CAPTURE(format_name(f), dim, trial, tokens);
        REQUIRE(quest_bound(view, q.data()) >= best - 1e-4 * std::fabs(best));
      }
    }
  }
}
