#include <catch2/catch.hpp>

#include <cstdint>
#include <set>

#include "memory/page_pool.h"

using namespace kv;

TEST_CASE("Pages are aligned, distinct and recycled at refcount zero", "[memory]") {
  PagePool pool(4096, 4096, 3);
  std::set<std::byte*> seen;
  std::vector<PageId> ids;
  for (int i = 0; i < 7; ++i) {
    const PageId id = pool.allocate();
    ids.push_back(id);
    REQUIRE(reinterpret_cast<std::uintptr_t>(pool.data(id)) % 4096 == 0);
    REQUIRE(seen.insert(pool.data(id)).second);
    REQUIRE(pool.page(id).refcount == 1);
    REQUIRE(pool.page(id).tier == Tier::L1);
  }
  CHECK(pool.live_pages() == 7);
  CHECK(pool.reserved_bytes() == 9 * 4096);
  pool.retain(ids[0]);
  pool.release(ids[0]);
  CHECK(pool.live_pages() == 7);
  pool.release(ids[0]);
  CHECK(pool.live_pages() == 6);
  CHECK(pool.allocate() == ids[0]);  // the freed page comes back first
  CHECK(pool.peak_live_pages() == 7);
}
