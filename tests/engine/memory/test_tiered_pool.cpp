#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "memory/tiered_pool.h"
#include "runtime/error.h"
#include "test_support.h"

using namespace kv;

namespace {

constexpr std::size_t kPage = 64u << 10;

MemoryConfig tiered(const std::string& dir, std::size_t l1_pages, FileIo* io = nullptr) {
  MemoryConfig c;
  c.l1_bytes = l1_pages * kPage;
  c.l2.dir = dir;
  c.l2.segment_bytes = 4u << 20;
  c.l2.batch_bytes = 256u << 10;
  c.l2.io = io;
  return c;
}

void fill(std::byte* frame, PageId id) { std::memset(frame, static_cast<int>(id * 7 + 1) & 0xFF, kPage); }

bool holds(const std::byte* frame, PageId id) {
  for (std::size_t i = 0; i < kPage; i += 1024) {
    if (frame[i] != static_cast<std::byte>((id * 7 + 1) & 0xFF)) return false;
  }
  return true;
}

std::vector<PageId> allocate(TieredPool& pool, int n) {
  std::vector<PageId> ids;
  for (int i = 0; i < n; ++i) {
    ids.push_back(pool.allocate());
    fill(pool.frame(ids.back()), ids.back());
  }
  return ids;
}

std::vector<MemoryEvent> of_kind(const std::vector<MemoryEvent>& events, MemoryEvent::Kind kind) {
  std::vector<MemoryEvent> out;
  for (const auto& e : events) {
    if (e.kind == kind) out.push_back(e);
  }
  return out;
}

}  // namespace

TEST_CASE("without a cap every page stays in L1", "[memory][tiers]") {
  TieredPool pool(kPage, 64, MemoryConfig{});
  const auto ids = allocate(pool, 40);
  pool.relieve_pressure();
  for (PageId id : ids) CHECK(pool.resident(id));
  CHECK(pool.stats().level == PressureLevel::Safe);
  pool.release(ids[3]);
  CHECK(pool.live_pages() == 39);
  CHECK(pool.allocate() == ids[3]);  // ids are reused
}

TEST_CASE("watermarks: warning at 15% free demotes to 25% free, then safe", "[memory][tiers]") {
  kvtest::TempDir dir("tiers-watermarks");
  TieredPool pool(kPage, 64, tiered(dir.path, 100));
  auto ids = allocate(pool, 85);  // 15% free: not above the watermark
  pool.pin(ids[0]);
  pool.relieve_pressure();
  const auto events = pool.take_events();
  const auto pressure = of_kind(events, MemoryEvent::Kind::Pressure);
  REQUIRE(pressure.size() == 2);
  CHECK(pressure[0].from == PressureLevel::Safe);
  CHECK(pressure[0].to == PressureLevel::Warning);
  CHECK(pressure[0].l1_used_bytes == 85 * kPage);
  CHECK(pressure[1].to == PressureLevel::Safe);
  const MemoryStats stats = pool.stats();
  CHECK(stats.l1_used_bytes == 75 * kPage);
  CHECK(stats.demotions == 10);
  CHECK(pool.resident(ids[0]));  // pinned and the oldest: never demoted
  CHECK_FALSE(pool.resident(ids[1]));  // the oldest unpinned pages went first
  CHECK(pool.resident(ids[84]));
  // 84 pages: 16% free, safe; no event.
  TieredPool calm(kPage, 64, tiered(dir.path, 100));
  allocate(calm, 84);
  calm.relieve_pressure();
  CHECK(calm.take_events().empty());
}

TEST_CASE("demoted pages come back intact, clean copies are dropped, not rewritten", "[memory][tiers]") {
  kvtest::TempDir dir("tiers-roundtrip");
  TieredPool pool(kPage, 64, tiered(dir.path, 32));
  const auto ids = allocate(pool, 60);
  pool.relieve_pressure();
  std::vector<PageId> cold;
  for (PageId id : ids) {
    if (!pool.resident(id)) cold.push_back(id);
  }
  REQUIRE(cold.size() >= 30);
  std::vector<const std::byte*> frames;
  pool.acquire(cold, frames);
  for (std::size_t i = 0; i < cold.size(); ++i) {
    REQUIRE(holds(frames[i], cold[i]));
    CHECK(pool.version(cold[i]) % 2 == 0);
  }
  const TrafficCounters before_step = pool.traffic();
  pool.end_step({});
  MemoryStats stats = pool.stats();
  CHECK(stats.demand_loads == cold.size());
  CHECK(stats.swap_in_bytes == cold.size() * kPage);
  // One acquisition that loaded pages from the device is one wait for it, however many pages.
  REQUIRE(stats.buffered_demand < stats.demand_loads);
  CHECK(stats.demand_waits == 1);
  // The traffic snapshot agrees with the stats, and a difference of two is what moved between.
  const TrafficCounters now = pool.traffic();
  CHECK(now.demand_loads == stats.demand_loads);
  CHECK(now.swap_in_bytes == stats.swap_in_bytes);
  CHECK(now.demotions == stats.demotions);
  CHECK(now.swap_out_bytes == stats.swap_out_bytes);
  const TrafficCounters moved = now - before_step;
  CHECK(moved.demand_loads == 0);  // acquire() loaded them, before the snapshot
  CHECK(moved.demotions == stats.demotions - before_step.demotions);
  const auto written = stats.demotions;
  // The loaded pages are clean: demoting them again only drops the L1 copy.
  pool.acquire({ids[59]}, frames);  // keep one hot
  pool.end_step({});
  stats = pool.stats();
  CHECK(stats.drops > 0);
  CHECK(stats.l1_used_bytes <= 32 * kPage);
  CHECK(stats.demotions >= written);
}

TEST_CASE("write amplification counts intact batches only and is never below 1", "[memory][tiers]") {
  kvtest::TempDir dir("tiers-write-amp");
  TieredPool pool(kPage, 64, tiered(dir.path, 32));
  CHECK(pool.stats().write_amplification() == 0.0);  // nothing written: no ratio (callers report NULL)
  allocate(pool, 60);
  pool.relieve_pressure();
  // Before the write buffers reach the device, demoted bytes exceed device bytes: the ratio of
  // those two (what it once was) could fall below 1.
  MemoryStats before = pool.stats();
  CHECK(before.swap_out_bytes > 0);
  CHECK(before.l2_flushed_page_bytes <= before.swap_out_bytes);
  pool.drain();
  const MemoryStats after = pool.stats();
  REQUIRE(after.l2_flushed_page_bytes > 0);
  CHECK(after.l2_flushed_device_bytes >= after.l2_flushed_page_bytes);
  CHECK(after.write_amplification() >= 1.0);
  // Batches are padded to 4 KiB and hold whole pages: little more than the pages' bytes.
  CHECK(after.write_amplification() < 1.5);
}

TEST_CASE("prefetch loads predicted pages before the step that reads them", "[memory][tiers]") {
  kvtest::TempDir dir("tiers-prefetch");
  TieredPool pool(kPage, 64, tiered(dir.path, 100));
  const auto ids = allocate(pool, 120);  // demoted to 75 pages: room for 10 up to the watermark
  pool.relieve_pressure();
  std::vector<PageId> cold;
  for (PageId id : ids) {
    if (!pool.resident(id) && cold.size() < 8) cold.push_back(id);
  }
  REQUIRE(cold.size() == 8);
  pool.end_step(cold);  // predicted for the next step
  std::vector<const std::byte*> frames;
  pool.acquire(cold, frames);
  for (std::size_t i = 0; i < cold.size(); ++i) REQUIRE(holds(frames[i], cold[i]));
  pool.end_step({});
  const MemoryStats stats = pool.stats();
  CHECK(stats.prefetch_loads == 8);
  CHECK(stats.prefetch_hits == 8);
  CHECK(stats.demand_loads == 0);
  CHECK(stats.prefetch_hit_rate() == 1.0);
}

TEST_CASE("pressure relief spares predicted pages down to the target and takes them only to leave warning", "[memory][tiers]") {
  kvtest::TempDir dir("tiers-spare-predicted");
  TieredPool pool(kPage, 64, tiered(dir.path, 100));
  const auto ids = allocate(pool, 85);  // 15% free: warning
  SECTION("enough other pages: only they go") {
    const std::vector<PageId> predicted(ids.begin(), ids.begin() + 80);
    pool.advise(predicted, 10);
    pool.relieve_pressure();
    for (PageId id : predicted) CHECK(pool.resident(id));
    CHECK(pool.stats().l1_used_bytes == 80 * kPage);  // 20% free: out of warning, short of the 25% target
    CHECK(pool.stats().level == PressureLevel::Safe);
  }
  SECTION("every page predicted: one goes, to leave warning") {
    pool.advise(ids, 10);
    pool.relieve_pressure();
    CHECK(pool.stats().l1_used_bytes == 84 * kPage);
    CHECK(pool.stats().level == PressureLevel::Safe);
  }
  SECTION("every page predicted, all but the newest an image's: the text page goes, no image page") {
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) pool.seal_read_only(ids[i]);
    pool.advise(ids, 10);
    pool.relieve_pressure();
    CHECK_FALSE(pool.resident(ids.back()));  // the newest, so the last by retention without the rule
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) CHECK(pool.resident(ids[i]));
    CHECK(pool.stats().l1_used_bytes == 84 * kPage);
    CHECK(pool.stats().level == PressureLevel::Safe);
  }
  SECTION("every page predicted and an image's: one goes as a last resort, to leave warning") {
    for (PageId id : ids) pool.seal_read_only(id);
    pool.advise(ids, 10);
    pool.relieve_pressure();
    CHECK(pool.stats().l1_used_bytes == 84 * kPage);
    CHECK(pool.stats().level == PressureLevel::Safe);
  }
  SECTION("image pages not predicted go like any other") {
    for (PageId id : ids) pool.seal_read_only(id);
    pool.relieve_pressure();
    CHECK(pool.stats().l1_used_bytes == 75 * kPage);
  }
}

TEST_CASE("prefetch takes room from the read cache, never a page predicted for a coming step", "[memory][tiers]") {
  kvtest::TempDir dir("tiers-read-cache");
  TieredPool pool(kPage, 64, tiered(dir.path, 100));
  const auto ids = allocate(pool, 120);
  pool.relieve_pressure();  // 75 resident, 45 in L2
  std::vector<PageId> cold;
  for (PageId id : ids) {
    if (!pool.resident(id)) cold.push_back(id);
  }
  REQUIRE(cold.size() == 45);
  // Ten of them come back on demand: clean copies (the read cache), and important ones.
  const std::vector<PageId> cached(cold.begin(), cold.begin() + 10);
  std::vector<const std::byte*> frames;
  pool.acquire(cached, frames);
  for (PageId id : cached) pool.set_importance(id, 1.0f);
  pool.end_step({});  // relief demotes older pages to the 75% target
  for (PageId id : cached) REQUIRE(pool.resident(id));
  REQUIRE(pool.stats().l1_used_bytes == 75 * kPage);
  // Five clean copies are predicted for the coming steps, five are not.
  const std::vector<PageId> kept(cached.begin(), cached.begin() + 5), spare(cached.begin() + 5, cached.end());
  pool.advise(kept, 5);
  // Twelve pages predicted next: 10 fit below the watermark, two take read-cache room.
  const std::vector<PageId> wanted(cold.begin() + 10, cold.begin() + 22);
  const std::uint64_t drops = pool.stats().drops;
  pool.advise(wanted, 5);
  for (PageId id : kept) CHECK(pool.resident(id));
  for (PageId id : wanted) CHECK(pool.resident(id));
  CHECK(std::count_if(spare.begin(), spare.end(), [&](PageId id) { return pool.resident(id); }) == 3);
  const MemoryStats stats = pool.stats();
  CHECK(stats.drops == drops + 2);  // clean copies: dropped, not written
  CHECK(stats.prefetch_loads == 12);
  CHECK(stats.l1_used_bytes == 85 * kPage);
  pool.acquire(wanted, frames);
  for (std::size_t i = 0; i < wanted.size(); ++i) CHECK(holds(frames[i], wanted[i]));
  pool.end_step({});
  CHECK(pool.stats().prefetch_hits == 12);
}

TEST_CASE("figures by decode phase: the first step after a prefill, and the steps after it", "[memory][tiers]") {
  kvtest::TempDir dir("tiers-phases");
  TieredPool pool(kPage, 64, tiered(dir.path, 100));
  const auto ids = allocate(pool, 120);
  pool.relieve_pressure();
  std::vector<PageId> cold;
  for (PageId id : ids) {
    if (!pool.resident(id)) cold.push_back(id);
  }
  std::vector<const std::byte*> frames;
  pool.set_step_kind(StepKind::Prefill);
  pool.acquire({cold[0]}, frames);
  pool.end_step({});
  pool.set_step_kind(StepKind::FirstDecode);
  pool.acquire({cold[1], cold[2], ids[0]}, frames);
  CHECK(pool.step_demand_loads() == std::vector<PageId>{cold[1], cold[2]});
  pool.end_step({cold[3], cold[4]});  // prefetched for the next step
  CHECK(pool.step_demand_loads().empty());
  pool.set_step_kind(StepKind::Decode);
  pool.acquire({cold[3], cold[5]}, frames);  // one prefetched, one not
  pool.count_unpredictable(1);
  pool.end_step({cold[6]});
  pool.acquire({ids[0]}, frames);  // cold[6] is never read
  pool.end_step({});
  pool.release(cold[4]);  // freed unread: unused prefetches
  pool.release(cold[6]);
  const MemoryStats stats = pool.stats();
  CHECK(stats.demand_loads == 4);
  CHECK(stats.first_step_pages == 3);
  CHECK(stats.first_step_demand_loads == 2);
  CHECK(stats.later_demand_loads == 1);
  CHECK(stats.later_prefetch_hits == 1);
  CHECK(stats.later_unpredictable_loads == 1);
  CHECK(stats.prefetch_hit_rate_after_first() == 0.5);
  CHECK(stats.prefetch_hit_rate_predictable() == 1.0);  // the miss could not be predicted
  CHECK(stats.decode_steps == 3);
  CHECK(stats.prefetch_loads == 3);
  CHECK(stats.prefetch_unused == 2);
  CHECK(stats.prefetch_unused_bytes == 2 * kPage);
}

TEST_CASE("danger: pinned pages fill L1, the budget is tightened, L1 overflows but nothing fails", "[memory][tiers]") {
  kvtest::TempDir dir("tiers-danger");
  TieredPool pool(kPage, 64, tiered(dir.path, 20));
  const auto ids = allocate(pool, 24);
  for (PageId id : ids) pool.pin(id);
  const TieredPool::Relief relief = pool.relieve_pressure();
  CHECK(relief.tighten_budget);  // the owner's to apply: the pool reports no event of its own for it
  CHECK_FALSE(relief.requantize);  // no long tail declared
  const auto events = pool.take_events();
  const auto pressure = of_kind(events, MemoryEvent::Kind::Pressure);
  REQUIRE(pressure.size() == 2);
  CHECK(pressure[1].to == PressureLevel::Danger);
  CHECK(pressure[1].reason == "pinned pages alone near the L1 cap");
  // Still in danger: no second request.
  CHECK_FALSE(pool.relieve_pressure().tighten_budget);
  CHECK(of_kind(events, MemoryEvent::Kind::Overflow).size() == 1);
  for (PageId id : ids) CHECK(pool.resident(id));
  for (PageId id : ids) pool.unpin(id);
  pool.relieve_pressure();
  CHECK(pool.stats().level == PressureLevel::Safe);
}

TEST_CASE("ENOSPC or EIO on an L2 write: demotion stops, an event says why, pages stay intact", "[memory][tiers]") {
  const int error = GENERATE(ENOSPC, EIO);
  CAPTURE(error);
  kvtest::TempDir dir("tiers-enospc");
  FaultyFileIo io;
  TieredPool pool(kPage, 64, tiered(dir.path, 20, &io));
  io.fail_writes_after(0, error);
  auto ids = allocate(pool, 18);
  pool.relieve_pressure();  // demotes into the write buffer
  pool.drain();             // the write fails
  const auto more = allocate(pool, 10);
  ids.insert(ids.end(), more.begin(), more.end());
  pool.relieve_pressure();
  const auto events = pool.take_events();
  const auto failed = of_kind(events, MemoryEvent::Kind::L2Failed);
  REQUIRE(failed.size() == 1);
  CHECK_THAT(failed[0].reason, Catch::Contains(std::strerror(error)));
  CHECK_THAT(failed[0].reason, Catch::Contains(error == ENOSPC ? "ENOSPC" : "EIO"));
  CHECK(pool.stats().l2_flushed_page_bytes == 0);  // a failed batch is no write of its pages
  CHECK(pool.stats().level == PressureLevel::Danger);
  CHECK(pool.stats().l2_failed);
  // The 3 pages demoted into the batch that never reached the device are back in L1.
  CHECK(failed[0].pages == 3);
  CHECK_THAT(failed[0].reason, Catch::Contains("3 pages its unwritten batches held came back to L1"));
  for (PageId id : ids) CHECK(pool.resident(id));
  CHECK(pool.stats().l1_used_bytes == 28 * kPage);
  std::vector<const std::byte*> frames;
  pool.acquire(ids, frames);
  for (std::size_t i = 0; i < ids.size(); ++i) REQUIRE(holds(frames[i], ids[i]));
  pool.end_step({});
}

TEST_CASE("a write failure noticed while a step holds pages: its unwritten pages come back once the step ends",
          "[memory][tiers]") {
  kvtest::TempDir dir("tiers-enospc-held");
  FaultyFileIo io;
  TieredPool pool(kPage, 64, tiered(dir.path, 20, &io));
  io.fail_writes_after(1, ENOSPC);
  auto ids = allocate(pool, 18);
  pool.relieve_pressure();  // 3 pages into a batch...
  pool.drain();             // ...that is written
  std::vector<PageId> on_device;
  for (PageId id : ids) {
    if (!pool.resident(id)) on_device.push_back(id);
  }
  REQUIRE(on_device.size() == 3);
  const auto more = allocate(pool, 3);
  ids.insert(ids.end(), more.begin(), more.end());
  pool.relieve_pressure();  // 3 more into the next batch...
  pool.drain();             // ...whose write fails; the pool has not looked yet
  std::vector<PageId> unwritten;
  for (PageId id : ids) {
    if (!pool.resident(id) && std::find(on_device.begin(), on_device.end(), id) == on_device.end()) unwritten.push_back(id);
  }
  REQUIRE(unwritten.size() == 3);
  const auto full = allocate(pool, 5);  // L1 full: the demand load below must make room
  ids.insert(ids.end(), full.begin(), full.end());
  pool.take_events();
  std::vector<const std::byte*> frames;
  pool.acquire({on_device[0]}, frames);  // notices the failure: nothing moves under the step
  CHECK(holds(frames[0], on_device[0]));
  for (PageId id : unwritten) CHECK_FALSE(pool.resident(id));
  CHECK(of_kind(pool.take_events(), MemoryEvent::Kind::L2Failed).empty());
  pool.end_step({});
  const auto failed = of_kind(pool.take_events(), MemoryEvent::Kind::L2Failed);
  REQUIRE(failed.size() == 1);
  CHECK(failed[0].pages == 3);
  for (PageId id : unwritten) CHECK(pool.resident(id));
  pool.acquire(unwritten, frames);
  for (std::size_t i = 0; i < unwritten.size(); ++i) CHECK(holds(frames[i], unwritten[i]));
  pool.end_step({});
  // The pages written before the failure are still read from the device.
  pool.acquire(on_device, frames);
  for (std::size_t i = 0; i < on_device.size(); ++i) CHECK(holds(frames[i], on_device[i]));
  pool.end_step({});
}

TEST_CASE("EIO on an L2 read is an error naming the store, healed, the read is retried", "[memory][tiers]") {
  kvtest::TempDir dir("tiers-eio");
  FaultyFileIo io;
  TieredPool pool(kPage, 64, tiered(dir.path, 20, &io));
  const auto ids = allocate(pool, 30);
  pool.relieve_pressure();
  pool.drain();
  REQUIRE_FALSE(pool.resident(ids[1]));
  io.fail_reads(EIO);
  std::vector<const std::byte*> frames;
  CHECK_THROWS_WITH(pool.acquire({ids[1]}, frames), Catch::Contains(std::strerror(EIO)) && Catch::Contains("seg-0.kvl2"));
  io.heal();
  pool.acquire({ids[1]}, frames);
  CHECK(holds(frames[0], ids[1]));
  pool.end_step({});
}

TEST_CASE("the optional MemAvailable watermark degrades a run on a machine low on memory", "[memory][tiers]") {
  kvtest::TempDir dir("tiers-memavailable");
  MemoryConfig config = tiered(dir.path, 100);
  config.mem_available_floor_bytes = std::size_t{1} << 60;  // no machine has this much available
  TieredPool pool(kPage, 64, config);
  allocate(pool, 10);  // L1 itself is nearly empty
  const bool tighten = pool.relieve_pressure().tighten_budget;
  const auto events = pool.take_events();
  REQUIRE_FALSE(events.empty());
  CHECK(events[0].reason == "MemAvailable below mem_available_floor_bytes");
  CHECK(pool.stats().level == PressureLevel::Danger);
  CHECK(tighten);
  // Off by default.
  TieredPool calm(kPage, 64, tiered(dir.path, 100));
  allocate(calm, 10);
  calm.relieve_pressure();
  CHECK(calm.take_events().empty());
}

TEST_CASE("memory config: bad fields are named", "[memory][tiers]") {
  MemoryConfig c;
  c.l2.dir = "/tmp";
  CHECK_THROWS_WITH(validate_memory_config(c), Catch::Contains("l1_bytes"));
  c = MemoryConfig{};
  c.target_free = 0.1;
  CHECK_THROWS_WITH(validate_memory_config(c), Catch::Contains("target_free"));
  c = MemoryConfig{};
  c.prefetch_lookahead = -1;
  CHECK_THROWS_WITH(validate_memory_config(c), Catch::Contains("prefetch_lookahead"));
}

TEST_CASE("a read-only page refuses writes and requantization, moves through L2 intact and is writable once reused",
          "[memory][tiers]") {
  kvtest::TempDir dir("tiers-read-only");
  TieredPool pool(kPage, 64, tiered(dir.path, 32));
  pool.set_long_tail(kPage / 4);
  const auto ids = allocate(pool, 60);
  for (int i = 0; i < 20; ++i) pool.seal_read_only(ids[static_cast<std::size_t>(i)]);
  CHECK(pool.read_only(ids[0]));
  CHECK_FALSE(pool.read_only(ids[20]));
  CHECK_THROWS_WITH(pool.frame(ids[0]), Catch::Contains("TieredPool::frame") && Catch::Contains("page") &&
                                            Catch::Contains("read-only"));
  CHECK_THROWS_WITH(pool.begin_requantize(ids[1]), Catch::Contains("TieredPool::begin_requantize") && Catch::Contains("read-only"));
  CHECK(pool.version(ids[1]) % 2 == 0);  // the refused rewrite left no mark
  const TieredPool& reader = pool;
  CHECK(reader.frame(ids[19]) != nullptr);  // reading stays open
  // Demoted to L2 and loaded back like any page, checksummed on the way: the same bytes.
  // A decode call counts the image pages resident once it ends (after its pressure relief).
  const auto resident_images = [&] {
    return static_cast<std::uint64_t>(std::count_if(ids.begin(), ids.begin() + 20, [&](PageId id) { return pool.resident(id); }));
  };
  pool.set_step_kind(StepKind::Decode);
  pool.end_step({});
  const std::uint64_t first = resident_images();
  CHECK(pool.stats().read_only_resident_sum == first);
  std::vector<PageId> cold;
  for (int i = 0; i < 20; ++i) {
    if (!pool.resident(ids[static_cast<std::size_t>(i)])) cold.push_back(ids[static_cast<std::size_t>(i)]);
  }
  REQUIRE_FALSE(cold.empty());
  std::vector<const std::byte*> frames;
  pool.acquire(cold, frames);
  for (std::size_t i = 0; i < cold.size(); ++i) {
    CHECK(holds(frames[i], cold[i]));
    CHECK(pool.read_only(cold[i]));
  }
  pool.end_step({});
  CHECK(pool.stats().read_only_resident_sum == first + resident_images());
  CHECK(pool.stats().decode_steps == 2);
  // Released and reused, the id is an ordinary page again.
  pool.release(ids[5]);
  const PageId reused = pool.allocate();
  REQUIRE(reused == ids[5]);
  CHECK_FALSE(pool.read_only(reused));
  CHECK(pool.frame(reused) != nullptr);
}

TEST_CASE("image frames are their own size class: counted at their size, through L2 intact, back to their class",
          "[memory][tiers]") {
  constexpr std::size_t kImageFrame = kPage / 2;
  kvtest::TempDir dir("tiers-visual");
  TieredPool pool(kPage, 64, tiered(dir.path, 32));
  pool.set_visual_bytes(kImageFrame);
  const auto text = allocate(pool, 10);
  std::vector<PageId> images;
  for (int i = 0; i < 20; ++i) {
    images.push_back(pool.allocate(FrameClass::Visual));
    std::memset(pool.frame(images.back()), static_cast<int>(images.back() * 7 + 1) & 0xFF, kImageFrame);
    pool.seal_read_only(images.back());
  }
  CHECK(pool.frame_class(images[0]) == FrameClass::Visual);
  CHECK(pool.frame_class(text[0]) == FrameClass::Page);
  CHECK(pool.stats().l1_used_bytes == 10 * kPage + 20 * kImageFrame);
  // Over the cap: demoted to L2 at their size, and back intact in a frame of their class.
  const auto more = allocate(pool, 20);
  pool.relieve_pressure();
  std::vector<PageId> cold;
  for (PageId id : images) {
    if (!pool.resident(id)) cold.push_back(id);
  }
  REQUIRE_FALSE(cold.empty());
  std::vector<const std::byte*> frames;
  const std::uint64_t swapped_in = pool.stats().swap_in_bytes;
  pool.acquire(cold, frames);
  for (std::size_t i = 0; i < cold.size(); ++i) {
    CAPTURE(i);
    const auto expected = static_cast<std::byte>((cold[i] * 7 + 1) & 0xFF);
    CHECK(frames[i][0] == expected);
    CHECK(frames[i][kImageFrame - 1] == expected);
    CHECK(pool.frame_class(cold[i]) == FrameClass::Visual);
  }
  CHECK(pool.stats().swap_in_bytes - swapped_in == cold.size() * kImageFrame);
  pool.end_step({});
  for (PageId id : text) pool.release(id);
  for (PageId id : more) pool.release(id);
  for (PageId id : images) pool.release(id);
  CHECK(pool.stats().l1_used_bytes == 0);
}

TEST_CASE("write_out: pages whose home is L2 leave L1 unless pinned, held, predicted or already in L2", "[memory][tiers]") {
  kvtest::TempDir dir("tiers-write-out");
  TieredPool pool(kPage, 64, tiered(dir.path, 64));
  const auto ids = allocate(pool, 8);
  pool.pin(ids[0]);
  pool.mark_predicted({ids[4]}, 1);
  std::vector<const std::byte*> frames;
  pool.acquire({ids[1]}, frames);  // held by the step in flight
  CHECK(pool.write_out({ids[0], ids[1], ids[2], ids[3], ids[4]}) == 2);
  CHECK(pool.resident(ids[0]));
  CHECK(pool.resident(ids[1]));
  CHECK_FALSE(pool.resident(ids[2]));
  CHECK_FALSE(pool.resident(ids[3]));
  CHECK(pool.resident(ids[4]));
  CHECK(pool.resident(ids[5]));  // not asked
  pool.end_step({});
  MemoryStats stats = pool.stats();
  CHECK(stats.demotions == 2);
  CHECK(stats.swap_out_bytes == 2 * kPage);
  CHECK(stats.l1_used_bytes == 6 * kPage);
  // Back on demand, intact: a clean copy, the read cache's to drop, not written out again.
  pool.acquire({ids[2]}, frames);
  CHECK(holds(frames[0], ids[2]));
  pool.end_step({});
  CHECK(pool.write_out({ids[2]}) == 0);
  CHECK(pool.resident(ids[2]));
  CHECK(pool.stats().demotions == 2);
  pool.unpin(ids[0]);
  // Without an L2 tier nothing moves.
  TieredPool flat(kPage, 64, MemoryConfig{});
  const auto kept = allocate(flat, 2);
  CHECK(flat.write_out(kept) == 0);
  CHECK(flat.resident(kept[0]));
}

TEST_CASE("image frames larger than text frames: loads on demand keep L1 within the cap", "[memory][tiers]") {
  constexpr std::size_t kWide = 3 * kPage;
  kvtest::TempDir dir("tiers-visual-wide");
  MemoryConfig config = tiered(dir.path, 16);
  config.demote_batch_pages = 1;
  config.prefetch_lookahead = 0;
  config.warning_free = 0.01;  // relief leaves less room than one image frame
  config.target_free = 0.02;
  TieredPool pool(kPage, 64, config);
  pool.set_visual_bytes(kWide);
  std::vector<PageId> images;
  for (int i = 0; i < 12; ++i) {  // as the sealer does: room first, then the frame
    pool.make_room(kWide);
    images.push_back(pool.allocate(FrameClass::Visual));
    std::memset(pool.frame(images.back()), static_cast<int>(images.back() * 7 + 1) & 0xFF, kWide);
    pool.relieve_pressure();
    pool.make_room(kPage);
    allocate(pool, 1);  // text pages between them: demotion may free one text page at a time
    pool.relieve_pressure();
  }
  CHECK(pool.stats().peak_l1_bytes <= 16 * kPage);
  REQUIRE(pool.stats().demotions > 0);
  for (int round = 0; round < 2; ++round) {
    for (PageId id : images) {
      std::vector<const std::byte*> frames;
      pool.acquire({id}, frames);
      CHECK(frames[0][kWide - 1] == static_cast<std::byte>((id * 7 + 1) & 0xFF));
      CHECK(pool.stats().l1_used_bytes <= 16 * kPage);
      pool.end_step({});
    }
  }
  CHECK(pool.stats().peak_l1_bytes <= 16 * kPage);
}
