// An image's pages in the cache: sealed as they fill and read-only (KVCache::add_image).
#include <catch2/catch.hpp>

#include <vector>

#include "attention/attention_ref.h"
#include "kv_cache.h"
#include "runtime/error.h"
#include "int_twin.h"
#include "test_support.h"

using namespace kv;

namespace {

constexpr int kImageKvHeads = 2, kImageQHeads = 4, kImageDim = 32, kImagePage = 16;

CacheConfig image_config(Format f, int residual) {
  CacheConfig c;
  c.geometry = {2, kImageQHeads, kImageKvHeads, kImageDim, 4096};
  c.k_format = f;
  c.v_format = f;
  c.page_tokens = kImagePage;
  c.residual_tokens = residual;
  c.threads = 2;
  return c;
}

// n random tokens appended to every layer of seq.
void append_all(KVCache& cache, SeqId seq, int n, std::uint32_t seed) {
  const auto k = kvtest::random_keys(n, kImageKvHeads, kImageDim, seed);
  const auto v = kvtest::random_values(static_cast<std::size_t>(n) * kImageKvHeads * kImageDim, seed + 1);
  for (int l = 0; l < cache.config().geometry.layers; ++l) cache.append(seq, l, k.data(), v.data(), n);
}

std::size_t sealed_pages(const KVCache& cache, SeqId seq, int layer) {
  std::size_t sealed = 0;
  const auto views = cache.page_views(seq, layer);
  for (const PageView& view : views[0]) sealed += view.layout != &cache.residual_layout() ? 1 : 0;
  return sealed;
}

// One decode step of `layer` over its stored pages (a context of `context` tokens) against the
// exact reference over the values as stored; where the decode kernel takes integer dot products,
// through their twin (int_twin.h).
void check_decode_against_reference(KVCache& cache, SeqId seq, int layer, int context, std::uint32_t seed) {
  const ModelGeometry& g = cache.config().geometry;
  const AttentionShape shape{g.q_heads, g.kv_heads, g.head_dim, cache.config().softmax_scale};
  const auto views = cache.page_views(seq, layer);
  const DenseKV dense = gather_pages_ref(shape, views);
  REQUIRE(dense.ctx == context);
  const auto q = kvtest::random_values(static_cast<std::size_t>(kImageQHeads) * kImageDim, seed);
  std::vector<float> out(q.size()), expected(q.size());
  cache.attend(seq, layer, q.data(), 1, out.data());
  const bool integer = kvtest::integer_decode(cache.isa(), views);
  if (integer) {
    expected = kvtest::twin_decode(cache.isa(), shape, views, q.data());
  } else {
    attention_ref(shape, q.data(), 1, dense.k.data(), dense.v.data(), dense.ctx, expected.data());
  }
  CHECK(kvtest::relative_error(out, expected) < (integer ? kvtest::kTwinTolerance : 2e-5f));
}

}  // namespace

TEST_CASE("an image's whole pages seal as they fill however recent, read-only, and attention reads them as stored",
          "[engine][images]") {
  KVCache cache(image_config(Format::Q4, 64));
  const SeqId seq = cache.create_sequence();
  append_all(cache, seq, kImagePage, 1);  // text: page 0
  // An image at tokens 16..55: pages 1 and 2 whole, page 3 shared with the text after it.
  CHECK(cache.add_image(seq, kImagePage, kImagePage + 40) == 2);
  CHECK(sealed_pages(cache, seq, 0) == 0);  // nothing of it yet; the text stays in the 64-token residual
  append_all(cache, seq, 20, 3);
  CHECK(sealed_pages(cache, seq, 0) == 2);  // page 1 filled: sealed, and the text page before it
  CHECK(cache.stats().read_only_pages == 1 * kImageKvHeads * 2);
  append_all(cache, seq, 20, 5);
  for (int layer = 0; layer < 2; ++layer) {
    CHECK(sealed_pages(cache, seq, layer) == 3);
    CHECK(cache.length(seq, layer) == 56);
  }
  CHECK(cache.stats().read_only_pages == 2 * kImageKvHeads * 2);
  append_all(cache, seq, 20, 7);  // the text after it: the image's shared page stays a text page
  CHECK(sealed_pages(cache, seq, 0) == 3);
  CHECK(cache.stats().read_only_pages == 2 * kImageKvHeads * 2);
  // Attention over the stored pages agrees with the exact reference over the same values.
  check_decode_against_reference(cache, seq, 0, 76, 9);
  // Released, the pages are ordinary again.
  cache.release(seq);
  CHECK(cache.stats().read_only_pages == 0);
}

TEST_CASE("an image's pages shared from a cached prefix become read-only when the image is added", "[engine][images]") {
  CacheConfig config = image_config(Format::Q8, 0);
  config.prefix_cache = true;
  KVCache cache(config);
  std::vector<TokenId> prompt(6 * kImagePage);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<TokenId>(i % 97);
  const SeqId first = cache.create_sequence();
  append_all(cache, first, static_cast<int>(prompt.size()), 1);
  REQUIRE(cache.cache_prefix(first, prompt) > 0);
  cache.release(first);  // its pages live on in the prefix cache, ordinary pages
  REQUIRE(cache.stats().read_only_pages == 0);
  const SeqId second = cache.create_sequence();
  const PrefixPlan plan = cache.lookup_prefix(prompt);
  REQUIRE(plan.tokens() >= 5 * kImagePage);
  cache.share_prefix(second, plan);
  CHECK(cache.add_image(second, kImagePage, 4 * kImagePage + 3) == 3);
  CHECK(cache.stats().read_only_pages == 3 * kImageKvHeads * 2);
  CHECK_THROWS_AS(cache.truncate(second, 2 * kImagePage), InputError);
}

TEST_CASE("a truncate into an image's read-only pages is refused and cuts nothing", "[engine][images]") {
  KVCache cache(image_config(Format::Q8, 0));
  const SeqId seq = cache.create_sequence();
  append_all(cache, seq, 2 * kImagePage, 1);
  REQUIRE(cache.add_image(seq, 2 * kImagePage, 5 * kImagePage) == 3);  // pages 2..4
  append_all(cache, seq, 3 * kImagePage, 3);
  append_all(cache, seq, 10, 5);
  for (const int cut : {2 * kImagePage + 1, 3 * kImagePage, 5 * kImagePage - 1}) {
    CAPTURE(cut);
    CHECK_THROWS_WITH(cache.truncate(seq, cut), Catch::Contains("KVCache::truncate") && Catch::Contains("new_length") &&
                                                    Catch::Contains("cuts into the read-only pages of the image at tokens 32..80"));
    CHECK(cache.length(seq, 0) == 5 * kImagePage + 10);
    CHECK(cache.length(seq, 1) == 5 * kImagePage + 10);
  }
  // A fork holds the same image: the same refusal.
  const SeqId child = cache.fork(seq);
  CHECK_THROWS_AS(cache.truncate(child, 4 * kImagePage), InputError);
  // Cut after the image: allowed; before it: the image goes whole, and a new one may be added there.
  cache.truncate(seq, 5 * kImagePage);
  CHECK(cache.length(seq, 0) == 5 * kImagePage);
  CHECK_THROWS_AS(cache.truncate(seq, 3 * kImagePage), InputError);  // the image stayed
  cache.truncate(seq, 2 * kImagePage);
  CHECK(cache.length(seq, 1) == 2 * kImagePage);
  CHECK(cache.add_image(seq, 2 * kImagePage, 4 * kImagePage) == 2);
  append_all(cache, seq, 2 * kImagePage, 7);
  CHECK_THROWS_AS(cache.truncate(seq, 3 * kImagePage), InputError);
  cache.truncate(child, 2 * kImagePage);  // the child's own image goes whole too
  CHECK(cache.length(child, 0) == 2 * kImagePage);
}

TEST_CASE("add_image: bad ranges get clear errors and change nothing", "[engine][images]") {
  KVCache cache(image_config(Format::Q4, 0));
  const SeqId seq = cache.create_sequence();
  append_all(cache, seq, 4 * kImagePage, 1);
  CHECK_THROWS_WITH(cache.add_image(seq, 8, 40), Catch::Contains("KVCache::add_image") && Catch::Contains("begin") &&
                                                      Catch::Contains("page boundary"));
  CHECK_THROWS_WITH(cache.add_image(seq, kImagePage, kImagePage), Catch::Contains("end") && Catch::Contains("after begin"));
  CHECK_THROWS_WITH(cache.add_image(seq, kImagePage, 5000), Catch::Contains("end") && Catch::Contains("max_seq 4096"));
  CHECK_THROWS_WITH(cache.add_image(99, 0, kImagePage), Catch::Contains("seq"));
  CHECK(cache.stats().read_only_pages == 0);
  cache.truncate(seq, 3 * kImagePage + 5);  // no image: any cut
  CHECK(cache.add_image(seq, 8 * kImagePage, 10 + 8 * kImagePage) == 0);  // smaller than a page: nothing is whole
  REQUIRE(cache.add_image(seq, kImagePage, 3 * kImagePage) == 2);
  CHECK(cache.stats().read_only_pages == 2 * kImageKvHeads * 2);
  CHECK_THROWS_WITH(cache.add_image(seq, 2 * kImagePage, 4 * kImagePage),
                    Catch::Contains("begin") && Catch::Contains("lies in an image added before"));
  const SeqId speculating = cache.create_sequence();
  append_all(cache, speculating, 2 * kImagePage, 3);
  cache.begin_tentative(speculating);
  CHECK_THROWS_WITH(cache.add_image(speculating, 0, kImagePage), Catch::Contains("seq") && Catch::Contains("tentative"));
}

TEST_CASE("danger's long tail requantizes text pages only, even while an image is being appended", "[memory][engine][images]") {
  constexpr int kImagePrompt = 1500, kImageText = 160, kImage = 1120;
  CacheConfig config = image_config(Format::Q8, 0);
  config.geometry = {2, 8, kImageKvHeads, 64, 4096};
  const PageLayout q8 = PageLayout::make({kImagePage, 64, Format::Q8, Format::Q8, 32, false});
  // No L2 tier and an L1 cap the image's own append crosses: only requantization can make room.
  config.memory.l1_bytes = static_cast<std::size_t>(kImagePrompt / kImagePage) * kImageKvHeads * 2 * q8.bytes * 8 / 10;
  config.memory.pin_window_tokens = 64;
  KVCache cache(config);
  const SeqId seq = cache.create_sequence();
  auto append = [&](int n, std::uint32_t seed) {
    const auto k = kvtest::random_keys(n, kImageKvHeads, 64, seed);
    const auto v = kvtest::random_values(static_cast<std::size_t>(n) * kImageKvHeads * 64, seed + 1);
    for (int l = 0; l < 2; ++l) cache.append(seq, l, k.data(), v.data(), n);
  };
  append(kImageText, 1);
  REQUIRE(cache.add_image(seq, kImageText, kImageText + kImage) == kImage / kImagePage);
  append(kImage, 3);
  REQUIRE(cache.stats().memory.requantized_pages > 0);  // danger came during the image's append
  append(kImagePrompt - kImageText - kImage, 5);
  for (int layer = 0; layer < 2; ++layer) {
    const auto views = cache.page_views(seq, layer);
    for (const auto& head : views) {
      int text_q2 = 0;
      for (std::size_t p = 0; p < head.size(); ++p) {
        const bool image = p >= kImageText / kImagePage && p < (kImageText + kImage) / kImagePage;
        if (image) CHECK(head[p].layout->k_format == Format::Q8);
        if (!image) text_q2 += head[p].layout->k_format == Format::Q2 ? 1 : 0;
      }
      CHECK(text_q2 > 0);
    }
  }
}

namespace {

// Records which pages were sealed with a calibration reference (Telemetry needs every hook).
struct ImageSealLog : Telemetry {
  std::vector<PageSealed> sealed;
  void on_page_sealed(const PageSealed& e) override { sealed.push_back(e); }
  void on_nan_inf(int, std::uint64_t) override {}
  void on_kernel(KernelKind, Isa) override {}
  void on_ops(Phase, const OpCounts&) override {}
};

}  // namespace

TEST_CASE("an image's whole pages in formats of their own: their own frames and layout, calibrated apart, read as stored",
          "[engine][images]") {
  CacheConfig config = image_config(Format::Q8, 0);
  config.v_group = 8;
  config.visual = {true, Format::Q4, Format::Q4, 32};
  ImageSealLog log;
  KVCache cache(config, &log);
  REQUIRE(cache.visual_layout().k_format == Format::Q4);
  REQUIRE(cache.visual_layout().v_group == 32);
  REQUIRE(cache.visual_layout().bytes < cache.layout().bytes);
  const SeqId seq = cache.create_sequence();
  append_all(cache, seq, 2 * kImagePage, 1);  // text: pages 0, 1 (their calibration's reference)
  REQUIRE(cache.add_image(seq, 2 * kImagePage, 5 * kImagePage + 4) == 3);  // pages 2..4; page 5 shared with text
  append_all(cache, seq, 3 * kImagePage + 4, 3);
  append_all(cache, seq, 2 * kImagePage, 5);
  for (int layer = 0; layer < 2; ++layer) {
    const auto views = cache.page_views(seq, layer);
    for (const auto& head : views) {
      REQUIRE(head.size() == 8);
      for (std::size_t p = 0; p < 7; ++p) {
        CAPTURE(layer, p);
        CHECK(head[p].layout == (p >= 2 && p < 5 ? &cache.visual_layout() : &cache.layout()));
      }
    }
  }
  // The image's first page has no reference: text pages never calibrate image pages.
  std::vector<int> first_image_with_reference, text_with_reference;
  for (const PageSealed& e : log.sealed) {
    if (e.logical_page == 2) first_image_with_reference.push_back(e.health.has_reference ? 1 : 0);
    if (e.logical_page == 5) text_with_reference.push_back(e.health.has_reference ? 1 : 0);
  }
  CHECK(first_image_with_reference == std::vector<int>(2 * kImageKvHeads, 0));
  CHECK(text_with_reference == std::vector<int>(2 * kImageKvHeads, 1));
  // Attention over the mixed pages agrees with the exact reference over the values as stored.
  for (std::uint32_t seed : {9u, 19u}) check_decode_against_reference(cache, seq, 1, 7 * kImagePage + 4, seed);
  // Their frames are their own class's size: L1 holds 4 text and 3 image pages per head and layer.
  const CacheStats stats = cache.stats();
  CHECK(stats.read_only_pages == 3 * kImageKvHeads * 2);
  const std::size_t frames = stats.memory.l1_used_bytes - (stats.residual_pages * cache.residual_layout().bytes) -
                             stats.memory.summary_index_bytes;
  CHECK(frames == 2 * kImageKvHeads * (4 * cache.layout().bytes + 3 * cache.visual_layout().bytes));
  // A cut before the image gives its frames back to their class.
  cache.truncate(seq, 2 * kImagePage);
  CHECK(cache.stats().read_only_pages == 0);
  cache.release(seq);
  CHECK(cache.stats().memory.l1_used_bytes == 0);
}

TEST_CASE("a visual V group that does not divide the head is refused naming visual.v_group", "[engine][images]") {
  CacheConfig config = image_config(Format::Q4, 0);
  config.visual = {true, Format::Q4, Format::Q4, 24};
  CHECK_THROWS_WITH(KVCache(config), Catch::Contains("cache config") && Catch::Contains("visual.v_group") &&
                                         Catch::Contains("does not divide head_dim 32"));
  config.visual.v_group = 0;
  CHECK_THROWS_WITH(KVCache(config), Catch::Contains("visual.v_group"));
}

TEST_CASE("with visual.tier l2 an image's pages leave L1 for L2 as they seal and attention reads them back as stored",
          "[memory][engine][images]") {
  kvtest::TempDir dir("images-l2");
  CacheConfig config = image_config(Format::Q8, 0);
  config.visual = {true, Format::Q4, Format::Q4, 32, VisualTier::L1};
  config.memory.l1_bytes = 64u << 20;  // far from pressure: only the tier moves pages
  config.memory.l2.dir = dir.path;
  config.memory.l2.segment_bytes = 4u << 20;
  config.memory.l2.batch_bytes = 256u << 10;
  KVCache in_l1(config);
  config.visual.tier = VisualTier::L2;
  KVCache in_l2(config);
  for (KVCache* cache : {&in_l1, &in_l2}) {
    const SeqId seq = cache->create_sequence();
    append_all(*cache, seq, 2 * kImagePage, 1);
    REQUIRE(cache->add_image(seq, 2 * kImagePage, 5 * kImagePage) == 3);
    append_all(*cache, seq, 3 * kImagePage, 3);
    append_all(*cache, seq, 2 * kImagePage + 5, 5);
  }
  const SeqId seq = 0;
  for (int layer = 0; layer < 2; ++layer) {
    for (const auto& head : in_l2.page_views(seq, layer)) {
      for (std::size_t p = 0; p < 7; ++p) {
        CAPTURE(layer, p);
        CHECK((head[p].data == nullptr) == (p >= 2 && p < 5));  // only the image's pages left L1
      }
    }
  }
  const MemoryStats written = in_l2.stats().memory;
  CHECK(written.demotions == 3 * kImageKvHeads * 2);
  CHECK(written.swap_out_bytes == written.demotions * in_l2.visual_layout().bytes);
  CHECK(in_l1.stats().memory.demotions == 0);
  CHECK(in_l2.stats().read_only_pages == 3 * kImageKvHeads * 2);
  // Loaded back (checksummed) on demand, they give the very output of the same pages kept in L1.
  for (std::uint32_t seed : {9u, 19u}) {
    const auto q = kvtest::random_values(static_cast<std::size_t>(kImageQHeads) * kImageDim, seed);
    for (int layer = 0; layer < 2; ++layer) {
      std::vector<float> from_l1(q.size()), from_l2(q.size());
      in_l1.attend(seq, layer, q.data(), 1, from_l1.data());
      in_l2.attend(seq, layer, q.data(), 1, from_l2.data());
      CHECK(from_l2 == from_l1);
    }
  }
  CHECK(in_l2.stats().memory.demand_loads >= 3 * kImageKvHeads);
  // A second image: only its own pages are written; the first one's copies loaded back stay.
  std::size_t resident_before = 0;
  for (const auto& head : in_l2.page_views(seq, 0)) resident_before += head[2].data != nullptr ? 1 : 0;
  REQUIRE(resident_before == kImageKvHeads);
  append_all(in_l2, seq, 8 * kImagePage - in_l2.length(seq, 0), 7);
  REQUIRE(in_l2.add_image(seq, 8 * kImagePage, 10 * kImagePage) == 2);
  append_all(in_l2, seq, 2 * kImagePage + 1, 9);
  CHECK(in_l2.stats().memory.demotions == written.demotions + 2 * kImageKvHeads * 2);
  for (const auto& head : in_l2.page_views(seq, 0)) {
    CHECK(head[2].data != nullptr);
    CHECK(head[8].data == nullptr);
    CHECK(head[9].data == nullptr);
  }
  // An l2 tier needs an L2 store.
  config.memory.l2.dir.clear();
  config.memory.l1_bytes = 0;
  CHECK_THROWS_WITH(KVCache(config), Catch::Contains("visual.tier") && Catch::Contains("needs an L2 tier"));
}
