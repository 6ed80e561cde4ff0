// The sealer: rows enter the residual with non-finite values replaced and counted; only pages
// that are full and older than residual_tokens are sealed, head by head with one event each in
// order and their summaries in the page table; sealed pages hold the quantized rows (F16 here:
// exact to f16 rounding); a truncate inside the residual is exact, and one into a sealed page
// returns that page's stored values to the residual.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "quant/fp16.h"
#include "quant/quantizer.h"
#include "sealer.h"
#include "test_support.h"

using namespace kv;

namespace {

CacheConfig small_config(int residual_tokens) {
  CacheConfig config;
  config.geometry = {2, 4, 2, 32, 4096};
  config.k_format = Format::F16;
  config.v_format = Format::F16;
  config.page_tokens = 16;
  config.residual_tokens = residual_tokens;
  return config;
}

struct SealerFixture {
  explicit SealerFixture(int residual_tokens) : config(small_config(residual_tokens)) {}
  CacheConfig config;
  PageLayout layout = cache_page_layout(config, Format::F16, Format::F16);
  PageLayout residual_layout = cache_page_layout(config, Format::F32, Format::F32);
  PageLayout long_tail = cache_page_layout(config, Format::Q2, Format::Q2);
  ThreadPool threads{2};
  TieredPool sealed{layout.bytes, kPageAlign, config.memory};
  PagePool residual{residual_layout.bytes, kPageAlign, 8};
  PageTable table{config.geometry, sealed, residual, residual_layout.bytes};
  Sealer sealer{config, {&layout, &residual_layout, &long_tail}, table, sealed, residual, threads, nullptr};
};

// The stored row of token t of kv head h in (seq, layer), from a sealed page or the residual.
std::vector<float> stored_k(SealerFixture& f, SeqId seq, int layer, int head, int t) {
  const HeadPages& pages = f.table.layer(seq, layer, "test").heads[static_cast<std::size_t>(head)];
  const auto page = static_cast<std::size_t>(t / f.config.page_tokens);
  std::vector<float> row(32);
  if (page < pages.sealed.size()) {
    dequantize_k_row_ref({&f.layout, f.sealed.frame(pages.sealed[page]), f.config.page_tokens}, t % f.config.page_tokens,
                         row.data());
  } else {
    const std::byte* data = f.residual.data(pages.residual[page - pages.sealed.size()]);
    dequantize_k_row_ref({&f.residual_layout, data, f.config.page_tokens}, t % f.config.page_tokens, row.data());
  }
  return row;
}

}  // namespace

TEST_CASE("the sealer seals full pages older than the residual window, head by head", "[engine][sealer]") {
  SealerFixture f(20);
  const SeqId seq = f.table.create();
  const int tokens = 70;  // 4 full pages and 6 tokens; 50 are older than the residual window
  const auto k = kvtest::random_values(static_cast<std::size_t>(tokens) * 2 * 32, 1);
  const auto v = kvtest::random_values(k.size(), 2);
  LayerPages& layer = f.table.layer(seq, 1, "test");
  CHECK(f.sealer.append(layer, k.data(), v.data(), tokens) == 0);
  CHECK(layer.length == tokens);
  const Sealer::Sealed sealed = f.sealer.seal_ready(seq, 1, Phase::Prefill);
  REQUIRE(sealed.events.size() == 2 * 3);  // 3 pages (48 tokens) per head
  for (std::size_t i = 0; i < sealed.events.size(); ++i) {
    CHECK(sealed.events[i].kv_head == static_cast<int>(i / 3));
    CHECK(sealed.events[i].logical_page == static_cast<int>(i % 3));
    CHECK(sealed.events[i].layer == 1);
  }
  CHECK(layer.sealed_tokens == 48);
  for (const HeadPages& head : layer.heads) {
    CHECK(head.sealed.size() == 3);
    CHECK(head.residual.size() == 2);
  }
  CHECK(f.table.summary_bytes() == 6 * PageSummaries::entry_bytes(32));
  CHECK(f.sealer.seal_ready(seq, 1, Phase::Prefill).events.empty());  // nothing more is ready
  for (int t : {0, 17, 47, 48, 69}) {
    for (int h = 0; h < 2; ++h) {
      const std::vector<float> row = stored_k(f, seq, 1, h, t);
      for (int c = 0; c < 32; ++c) {
        const float given = k[(static_cast<std::size_t>(t) * 2 + static_cast<std::size_t>(h)) * 32 + static_cast<std::size_t>(c)];
        CHECK(row[static_cast<std::size_t>(c)] == (t < 48 ? f16_to_f32(f32_to_f16(given)) : given));  // residual: F32
      }
    }
  }
}

TEST_CASE("the sealer replaces non-finite values by 0 and counts them", "[engine][sealer]") {
  SealerFixture f(0);
  const SeqId seq = f.table.create();
  std::vector<float> k(2 * 32, 1.0f), v(k.size(), 1.0f);
  k[3] = std::numeric_limits<float>::quiet_NaN();
  v[40] = std::numeric_limits<float>::infinity();
  CHECK(f.sealer.append(f.table.layer(seq, 0, "test"), k.data(), v.data(), 1) == 2);
  CHECK(stored_k(f, seq, 0, 0, 0)[3] == 0.0f);
}

TEST_CASE("a truncate into a sealed page returns its stored values to the residual", "[engine][sealer]") {
  SealerFixture f(0);
  const SeqId seq = f.table.create();
  const int tokens = 64;
  const auto k = kvtest::random_values(static_cast<std::size_t>(tokens) * 2 * 32, 3);
  const auto v = kvtest::random_values(k.size(), 4);
  LayerPages& layer = f.table.layer(seq, 0, "test");
  f.sealer.append(layer, k.data(), v.data(), tokens);
  f.sealer.seal_ready(seq, 0, Phase::Prefill);
  REQUIRE(layer.sealed_tokens == 64);
  const std::vector<float> kept = stored_k(f, seq, 0, 1, 37);
  f.sealer.truncate(seq, 0, 40);  // into page 2: tokens 32..39 return to the residual
  CHECK(layer.length == 40);
  CHECK(layer.sealed_tokens == 32);
  for (const HeadPages& head : layer.heads) {
    CHECK(head.sealed.size() == 2);
    REQUIRE(head.residual.size() == 1);
    CHECK(PageLayout::header(f.residual.data(head.residual[0]))->tokens == 8);
  }
  CHECK(stored_k(f, seq, 0, 1, 37) == kept);
  CHECK(f.sealed.live_pages() == 4);
  f.sealer.truncate(seq, 0, 35);  // inside the residual: exact
  CHECK(layer.length == 35);
  CHECK(PageLayout::header(f.residual.data(layer.heads[0].residual[0]))->tokens == 3);
  CHECK(f.table.summary_bytes() == 4 * PageSummaries::entry_bytes(32));
}
