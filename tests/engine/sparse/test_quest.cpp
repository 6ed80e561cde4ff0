#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "kv_cache.h"
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

TEST_CASE("Bounds from the cache's key bounds equal bounds from its page views", "[sparse]") {
  // Sealed pages (the summaries in place) and several residual pages (copies), kv heads in
  // parallel chunks and on one thread, on every kernel path.
  CacheConfig config;
  config.geometry = {1, 8, 2, 64, 4096};
  config.k_format = Format::Q4;
  config.v_format = Format::Q8;
  config.page_tokens = 16;
  config.residual_tokens = 40;
  config.threads = 2;
  KVCache cache(config);
  const SeqId seq = cache.create_sequence();
  const int tokens = 16 * 70 + 5;  // 64+ sealed pages, so a head splits into several tasks
  const auto k = kvtest::random_keys(tokens, 2, 64, 41);
  const auto v = kvtest::random_values(static_cast<std::size_t>(tokens) * 2 * 64, 42);
  cache.append(seq, 0, k.data(), v.data(), tokens);
  const auto views = cache.page_views(seq, 0);
  std::vector<HeadKeyBounds> heads;
  cache.key_bounds(seq, 0, heads);
  REQUIRE(heads.size() == 2);
  REQUIRE(heads[0].residual.size() / (2 * 64) >= 3);
  REQUIRE(heads[0].pages(64) == views[0].size());
  const auto q = kvtest::random_values(8 * 64, 43);
  for (Isa isa : kvtest::tested_isas()) {
    const auto want = quest_bounds(views, q.data(), 8, page_kernels(isa));
    const auto got = quest_bounds(heads, 64, q.data(), 8, page_kernels(isa), &cache.pool());
    CAPTURE(isa_name(isa));
    REQUIRE(got == want);
    for (std::size_t h = 0; h < 2; ++h) {
      for (std::size_t p = 0; p < views[h].size(); ++p) {
        REQUIRE(got[h][p] == Approx(page_bound_ref(views[h][p], q.data() + h * 4 * 64, 4)).margin(1e-4));
      }
    }
  }
}
