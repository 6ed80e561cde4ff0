// The page table: sealed pages pushed with their summaries, shared by fork (retained, one more
// owner each in the reverse index), cut by truncate and returned by release; the reverse index
// names every owner of a physical page and follows every change; a rewritten page's bounds reach
// every owner's summary; pins are handles that the table drops with their pages; the summary
// bytes follow the pages.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "memory/page_pin.h"
#include "page_table.h"
#include "quant/fp16.h"
#include "runtime/error.h"

using namespace kv;

namespace {

constexpr int kHeadDim = 32;

PageLayout test_layout() {
  PageLayoutSpec spec;
  spec.page_tokens = 16;
  spec.head_dim = kHeadDim;
  spec.k_format = Format::Q8;
  spec.v_format = Format::Q8;
  return PageLayout::make(spec);
}

ModelGeometry geometry() { return {2, 4, 2, kHeadDim, 4096}; }

struct Fixture {
  PageLayout layout = test_layout();
  MemoryConfig memory;
  TieredPool sealed{layout.bytes, kPageAlign, memory};
  PagePool residual{layout.bytes, kPageAlign, 8};
  PageTable table{geometry(), sealed, residual, layout.bytes};

  // A sealed page whose key bounds are all `value`, pushed to (seq, layer, head).
  PageId push(SeqId seq, int layer, int head, float value) {
    const PageId id = sealed.allocate();
    std::byte* frame = sealed.frame(id);
    std::fill_n(layout.at<std::uint16_t>(frame, layout.key_min), kHeadDim, f32_to_f16(value));
    std::fill_n(layout.at<std::uint16_t>(frame, layout.key_max), kHeadDim, f32_to_f16(value + 1.0f));
    const std::vector<std::uint16_t> means(2 * kHeadDim, f32_to_f16(value));
    table.push_sealed(seq, layer, head, id, layout, means.data());
    return id;
  }
};

bool owns(const PageTable& table, PageId id, SeqId seq, int layer, int head, std::size_t position) {
  const auto& owners = table.owners(id);
  return std::any_of(owners.begin(), owners.end(), [&](const PageOwner& o) {
    return o.seq == seq && o.layer == layer && o.head == head && o.position == position;
  });
}

}  // namespace

TEST_CASE("the reverse index names every owner of a page through fork, truncate and release", "[engine][page_table]") {
  Fixture f;
  const SeqId a = f.table.create();
  std::vector<PageId> pages;
  for (int p = 0; p < 3; ++p) pages.push_back(f.push(a, 1, 0, static_cast<float>(p)));
  const PageId other_head = f.push(a, 1, 1, 9.0f);
  for (std::size_t p = 0; p < pages.size(); ++p) {
    CHECK(f.table.owners(pages[p]).size() == 1);
    CHECK(owns(f.table, pages[p], a, 1, 0, p));
  }
  CHECK(owns(f.table, other_head, a, 1, 1, 0));
  CHECK(f.table.summary_bytes() == 4 * PageSummaries::entry_bytes(kHeadDim));

  const SeqId b = f.table.fork(a, "test");
  CHECK(f.sealed.live_pages() == 4);  // shared, not copied
  for (std::size_t p = 0; p < pages.size(); ++p) {
    CHECK(f.table.owners(pages[p]).size() == 2);
    CHECK(owns(f.table, pages[p], b, 1, 0, p));
  }
  CHECK(f.table.summary_bytes() == 8 * PageSummaries::entry_bytes(kHeadDim));
  const HeadPages& forked = f.table.layer(b, 1, "test").heads[0];
  REQUIRE(forked.sealed == pages);
  CHECK(f16_to_f32(forked.summaries.bounds(2, kHeadDim)[0]) == 2.0f);
  CHECK(forked.pins.size() == 3);
  CHECK_FALSE(forked.pins[0]);

  f.table.truncate_sealed(b, 1, 0, 1);  // b keeps its first page
  CHECK(f.table.owners(pages[0]).size() == 2);
  CHECK(f.table.owners(pages[1]).size() == 1);
  CHECK(owns(f.table, pages[1], a, 1, 0, 1));
  CHECK(f.sealed.live_pages() == 4);  // a still holds them

  f.table.release(a, "test");
  CHECK(f.table.owners(pages[0]).size() == 1);
  CHECK(owns(f.table, pages[0], b, 1, 0, 0));
  CHECK(f.table.owners(pages[2]).empty());
  CHECK(f.table.owners(other_head).size() == 1);  // b's copy of head 1
  CHECK(f.sealed.live_pages() == 2);
  f.table.release(b, "test");
  CHECK(f.sealed.live_pages() == 0);
  CHECK(f.table.summary_bytes() == 0);
  CHECK(f.table.sequences() == 0);
}

TEST_CASE("a rewritten page's key bounds reach every owner's summary", "[engine][page_table]") {
  Fixture f;
  const SeqId a = f.table.create();
  f.push(a, 0, 0, 1.0f);
  const PageId shared = f.push(a, 0, 0, 2.0f);
  const SeqId b = f.table.fork(a, "test");
  std::byte* frame = f.sealed.frame(shared);
  std::fill_n(f.layout.at<std::uint16_t>(frame, f.layout.key_min), kHeadDim, f32_to_f16(-5.0f));
  f.table.rewrite_bounds(shared, f.layout, frame);
  for (SeqId seq : {a, b}) {
    const PageSummaries& summaries = f.table.layer(seq, 0, "test").heads[0].summaries;
    CHECK(f16_to_f32(summaries.bounds(1, kHeadDim)[0]) == -5.0f);
    CHECK(f16_to_f32(summaries.bounds(0, kHeadDim)[0]) == 1.0f);     // the other page untouched
    CHECK(f16_to_f32(summaries.means(1, kHeadDim)[0]) == 2.0f);      // means stay
  }
}

TEST_CASE("pins are handles: the table drops them with their pages", "[engine][page_table]") {
  Fixture f;
  const SeqId a = f.table.create();
  const PageId first = f.push(a, 0, 1, 0.0f);
  const PageId second = f.push(a, 0, 1, 1.0f);
  HeadPages& head = f.table.layer(a, 0, "test").heads[1];
  head.pins[0] = PagePin(f.sealed, first);
  head.pins[1] = PagePin(f.sealed, second);
  const SeqId b = f.table.fork(a, "test");
  f.table.layer(b, 0, "test").heads[1].pins[1] = PagePin(f.sealed, second);  // two pins on one page
  CHECK(f.sealed.pinned(first));
  f.table.truncate_sealed(a, 0, 1, 0);
  CHECK_FALSE(f.sealed.pinned(first));
  CHECK(f.sealed.pinned(second));  // b's pin holds it
  f.table.release(b, "test");
  CHECK_FALSE(f.sealed.pinned(second));
  CHECK(f.sealed.pinned_bytes() == 0);

  PagePin pin(f.sealed, f.sealed.allocate());
  PagePin moved = std::move(pin);
  CHECK_FALSE(pin);
  CHECK(moved);
  moved.reset();
  CHECK(f.sealed.pinned_bytes() == 0);
}

TEST_CASE("the page table refuses unknown sequences and layers", "[engine][page_table]") {
  Fixture f;
  const SeqId a = f.table.create();
  CHECK_THROWS_WITH(f.table.layer(a, 2, "KVCache::append"), Catch::Contains("KVCache::append: layer: 2 is outside 0..1"));
  CHECK_THROWS_WITH(f.table.layers(a + 1, "KVCache::attend"), Catch::Contains("unknown sequence"));
  CHECK_THROWS_WITH(f.table.fork(a + 1, "KVCache::fork"), Catch::Contains("KVCache::fork: seq"));
  CHECK(f.table.sequences() == 1);  // a failed fork made nothing
}
