#include <catch2/catch.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <vector>

#include "memory/l2_store.h"
#include "runtime/error.h"
#include "test_support.h"

using namespace kv;
namespace fs = std::filesystem;

namespace {

std::vector<std::byte> page_bytes(std::size_t bytes, std::uint32_t seed) {
  std::vector<std::byte> page(bytes);
  std::mt19937 rng(seed);
  for (auto& b : page) b = static_cast<std::byte>(rng() & 0xFF);
  return page;
}

L2Config small_config(const std::string& dir) {
  L2Config c;
  c.dir = dir;
  c.segment_bytes = 4u << 20;
  c.batch_bytes = 256u << 10;
  return c;
}

std::vector<fs::path> segment_files(const L2Store& store) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(store.path())) {
    if (e.path().extension() == ".kvl2") files.push_back(e.path());
  }
  return files;
}

void flip_byte(const fs::path& file, std::uint64_t offset) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5A);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

}  // namespace

TEST_CASE("L2 pages read back equal, from the write buffer and from the device", "[memory][l2]") {
  kvtest::TempDir dir("l2-roundtrip");
  const bool direct = GENERATE(true, false);
  CAPTURE(direct);
  L2Config config = small_config(dir.path);
  config.direct_io = direct;
  L2Store store(config);
  if (!direct) CHECK(store.mode() == L2Mode::BufferedSync);
  CHECK_FALSE(store.fs_type().empty());
  const std::size_t bytes = 10304;  // not a multiple of 4 KiB: pages straddle blocks
  std::vector<L2Slot> slots;
  std::vector<std::vector<std::byte>> pages;
  for (std::uint32_t i = 0; i < 300; ++i) {
    pages.push_back(page_bytes(bytes, i));
    slots.push_back(store.append(pages.back().data(), bytes));
    REQUIRE(slots.back() != kNoSlot);
  }
  std::vector<std::byte> out(bytes);
  store.read(slots[299], out.data());  // still in the filling batch
  CHECK(out == pages[299]);
  REQUIRE(store.write_pending(true));
  for (std::size_t i = 0; i < slots.size(); ++i) {
    store.read(slots[i], out.data());
    REQUIRE(out == pages[i]);
  }
  const L2Stats stats = store.stats();
  CHECK(stats.page_bytes_appended == 300 * bytes);
  CHECK(stats.device_bytes_written >= 300 * bytes);
  CHECK(stats.device_bytes_written % kL2Align == 0);
  // Batches are written whole; only the last one is padded.
  CHECK(static_cast<double>(stats.device_bytes_written) / static_cast<double>(stats.page_bytes_appended) < 1.1);
  CHECK(stats.segments_created == 1);
  CHECK(stats.pages_read == 301);
}

TEST_CASE("a joined read returns the bytes of single reads with one I/O, and pages apart are read alone", "[memory][l2]") {
  kvtest::TempDir dir("l2-run");
  const bool direct = GENERATE(true, false);
  CAPTURE(direct);
  L2Config config = small_config(dir.path);
  config.direct_io = direct;
  L2Store store(config);
  const std::size_t bytes = 10304;  // pages straddle 4 KiB blocks; a batch holds 25 of them
  std::vector<L2Slot> slots;
  std::vector<std::vector<std::byte>> pages;
  for (std::uint32_t i = 0; i < 60; ++i) {
    pages.push_back(page_bytes(bytes, 100 + i));
    slots.push_back(store.append(pages.back().data(), bytes));
  }
  std::vector<std::vector<std::byte>> out(60, std::vector<std::byte>(bytes));
  const auto read_run = [&](std::size_t first, std::size_t count) {
    std::vector<L2Slot> ids(slots.begin() + static_cast<std::ptrdiff_t>(first), slots.begin() + static_cast<std::ptrdiff_t>(first + count));
    std::vector<std::byte*> dsts;
    for (std::size_t i = first; i < first + count; ++i) dsts.push_back(out[i].data());
    return store.read_run(ids, dsts);
  };
  // The last batch is still in memory: read one by one, still right.
  CHECK(store.location(slots[59]).segment == kNoSegment);
  for (const std::string& error : read_run(50, 10)) CHECK(error.empty());
  for (std::size_t i = 50; i < 60; ++i) CHECK(out[i] == pages[i]);
  REQUIRE(store.write_pending(true));
  const L2Location first = store.location(slots[0]), second = store.location(slots[1]);
  CHECK(first.segment == second.segment);
  CHECK(second.offset == first.offset + bytes);
  const std::uint64_t ios = store.stats().read_ios;
  // 0..39 crosses a batch boundary (its padding is under kMaxJoinGap): still one I/O.
  for (const std::string& error : read_run(0, 40)) CHECK(error.empty());
  for (std::size_t i = 0; i < 40; ++i) REQUIRE(out[i] == pages[i]);
  CHECK(store.stats().read_ios == ios + 1);
  // A hole of 19 pages (over kMaxJoinGap): read one by one.
  const std::vector<L2Slot> apart{slots[0], slots[20]};
  std::vector<std::byte*> dsts{out[0].data(), out[20].data()};
  for (const std::string& error : store.read_run(apart, dsts)) CHECK(error.empty());
  CHECK(store.stats().read_ios == ios + 3);
  CHECK(out[20] == pages[20]);
}

TEST_CASE("a joined read names the corrupt page and returns its intact neighbours", "[memory][l2]") {
  kvtest::TempDir dir("l2-run-corrupt");
  L2Store store(small_config(dir.path));
  const std::size_t bytes = 8192;
  std::vector<L2Slot> slots;
  std::vector<std::vector<std::byte>> pages;
  for (std::uint32_t i = 0; i < 8; ++i) {
    pages.push_back(page_bytes(bytes, i));
    slots.push_back(store.append(pages.back().data(), bytes));
  }
  REQUIRE(store.write_pending(true));
  const auto files = segment_files(store);
  REQUIRE(files.size() == 1);
  flip_byte(files[0], 5 * bytes + 100);
  std::vector<std::vector<std::byte>> out(8, std::vector<std::byte>(bytes));
  std::vector<std::byte*> dsts;
  for (auto& page : out) dsts.push_back(page.data());
  const std::vector<std::string> errors = store.read_run(slots, dsts);
  for (std::size_t i = 0; i < 8; ++i) {
    CAPTURE(i);
    if (i == 5) {
      CHECK_THAT(errors[i], Catch::Contains(files[0].string()) && Catch::Contains("page 5 at offset") && Catch::Contains("checksum mismatch"));
    } else {
      CHECK(errors[i].empty());
      CHECK(out[i] == pages[i]);
    }
  }
}

TEST_CASE("a corrupted or truncated segment is an error naming the segment and the page", "[memory][l2]") {
  kvtest::TempDir dir("l2-corrupt");
  L2Store store(small_config(dir.path));
  const std::size_t bytes = 8192;
  std::vector<L2Slot> slots;
  for (std::uint32_t i = 0; i < 64; ++i) slots.push_back(store.append(page_bytes(bytes, i).data(), bytes));
  REQUIRE(store.write_pending(true));
  const auto files = segment_files(store);
  REQUIRE(files.size() == 1);
  std::vector<std::byte> out(bytes);
  SECTION("a flipped byte") {
    flip_byte(files[0], 5 * bytes + 100);
    store.read(slots[4], out.data());  // its neighbours are intact
    try {
      store.read(slots[5], out.data());
      FAIL("a corrupted page was returned");
    } catch (const InputError& e) {
      CHECK(e.where() == files[0].string());
      CHECK(e.field() == "page 5 at offset " + std::to_string(5 * bytes));
      CHECK_THAT(e.reason(), Catch::Contains("checksum mismatch"));
    }
  }
  SECTION("a cut file") {
    fs::resize_file(files[0], 40 * bytes);
    store.read(slots[39], out.data());
    try {
      store.read(slots[50], out.data());
      FAIL("a page past the end of the file was returned");
    } catch (const InputError& e) {
      CHECK(e.where() == files[0].string());
      CHECK_THAT(e.reason(), Catch::Contains("truncated"));
    }
  }
}

TEST_CASE("injected faults: corrupted reads, EIO, ENOSPC and short writes", "[memory][l2]") {
  kvtest::TempDir dir("l2-faults");
  FaultyFileIo io;
  L2Config config = small_config(dir.path);
  config.io = &io;
  L2Store store(config);
  const std::size_t bytes = 4096 * 3;
  std::vector<std::vector<std::byte>> pages;
  std::vector<L2Slot> slots;
  const auto append = [&](int n) {
    for (int i = 0; i < n; ++i) {
      pages.push_back(page_bytes(bytes, static_cast<std::uint32_t>(pages.size())));
      slots.push_back(store.append(pages.back().data(), bytes));
    }
  };
  append(40);
  std::vector<std::byte> out(bytes);
  SECTION("a short write is completed") {
    io.short_write_once();
    REQUIRE(store.write_pending(true));
    store.read(slots[7], out.data());
    CHECK(out == pages[7]);
  }
  SECTION("corrupted reads and EIO are errors; healed, the page reads") {
    REQUIRE(store.write_pending(true));
    io.corrupt_reads(true);
    CHECK_THROWS_WITH(store.read(slots[3], out.data()), Catch::Contains("checksum mismatch") && Catch::Contains("seg-0.kvl2"));
    io.heal();
    io.fail_reads(EIO);
    CHECK_THROWS_WITH(store.read(slots[3], out.data()), Catch::Contains(std::strerror(EIO)));
    io.heal();
    store.read(slots[3], out.data());
    CHECK(out == pages[3]);
  }
  SECTION("ENOSPC fails the store; unwritten pages stay readable; no more appends") {
    io.fail_writes_after(0, ENOSPC);
    CHECK_FALSE(store.write_pending(true));
    CHECK(store.failed());
    CHECK_THAT(store.failure(), Catch::Contains(std::strerror(ENOSPC)) && Catch::Contains("seg-0.kvl2"));
    for (std::size_t i = 0; i < slots.size(); ++i) {
      store.read(slots[i], out.data());
      REQUIRE(out == pages[i]);
    }
    CHECK(store.append(pages[0].data(), bytes) == kNoSlot);
  }
}

TEST_CASE("a missing or unusable L2 directory is an error at open", "[memory][l2]") {
  kvtest::TempDir dir("l2-bad-dir");
  const std::string missing = dir.path + "/no-such-dir";
  CHECK_THROWS_MATCHES(L2Store(small_config(missing)), InputError,
                       Catch::Predicate<InputError>([&](const InputError& e) {
                         return e.where() == missing && e.field() == "l2_dir" && e.reason() == "does not exist";
                       }));
  const std::string file = dir.path + "/a-file";
  std::ofstream(file) << "x";
  CHECK_THROWS_WITH(L2Store(small_config(file)), Catch::Contains("is not a directory"));
  CHECK_THROWS_AS(L2Store(small_config("/proc")), InputError);  // not writable, even for root
  L2Config bad = small_config(dir.path);
  bad.segment_bytes = 1u << 20;
  CHECK_THROWS_WITH(L2Store(bad), Catch::Contains("l2_segment_bytes"));
}

TEST_CASE("files go when the store closes, directories of dead stores are cleaned at open", "[memory][l2]") {
  kvtest::TempDir dir("l2-cleanup");
  // A store directory left by a killed process: a lock file nobody holds.
  const fs::path stale = fs::path(dir.path) / "kvbench-l2-999999-0";
  fs::create_directories(stale);
  std::ofstream(stale / "lock") << "";
  std::ofstream(stale / "seg-0.kvl2") << "old";
  std::string first_path;
  {
    L2Store first(small_config(dir.path));
    first_path = first.path();
    CHECK_FALSE(fs::exists(stale));
    const auto page = page_bytes(4096, 1);
    first.append(page.data(), page.size());
    first.write_pending(true);
    L2Store second(small_config(dir.path));  // a live store's directory is left alone
    CHECK(fs::exists(first_path));
    CHECK(second.path() != first_path);
  }
  CHECK_FALSE(fs::exists(first_path));
  CHECK(fs::is_empty(dir.path));
}

TEST_CASE("compaction relocates the live pages of a mostly dead segment", "[memory][l2]") {
  kvtest::TempDir dir("l2-compact");
  L2Store store(small_config(dir.path));
  const std::size_t bytes = 64u << 10;
  std::vector<std::vector<std::byte>> pages;
  std::vector<L2Slot> slots;
  for (std::uint32_t i = 0; i < 100; ++i) {  // 6.25 MiB: two segments of 4 MiB
    pages.push_back(page_bytes(bytes, i));
    slots.push_back(store.append(pages.back().data(), bytes));
  }
  REQUIRE(store.write_pending(true));
  REQUIRE(store.stats().segments_created == 2);
  CHECK_FALSE(store.compact());  // nothing dead yet
  for (std::size_t i = 0; i < 64; ++i) {
    if (i % 4 != 0) store.release(slots[i]);  // 75% of the first segment dies
  }
  REQUIRE(store.compact());
  REQUIRE(store.write_pending(true));
  const L2Stats stats = store.stats();
  CHECK(stats.segments_deleted == 1);
  CHECK(stats.page_bytes_relocated == 16 * bytes);
  std::vector<std::byte> out(bytes);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (i < 64 && i % 4 != 0) continue;
    store.read(slots[i], out.data());
    REQUIRE(out == pages[i]);
  }
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (i >= 64 || i % 4 == 0) store.release(slots[i]);
  }
  CHECK(store.stats().live_bytes == 0);
}

TEST_CASE("an L2 cap makes the store full instead of growing", "[memory][l2]") {
  kvtest::TempDir dir("l2-cap");
  L2Config config = small_config(dir.path);
  config.max_bytes = 1u << 20;
  config.overprovision = 0.0;
  L2Store store(config);
  const auto page = page_bytes(64u << 10, 3);
  int stored = 0;
  for (;;) {
    if (store.append(page.data(), page.size(), false) != kNoSlot) {
      ++stored;
    } else if (store.has_pending_writes()) {
      REQUIRE(store.write_pending());
    } else {
      break;
    }
  }
  CHECK(stored == 16);  // 1 MiB of 64 KiB pages
  CHECK(store.full());
  CHECK(store.stats().disk_bytes <= config.max_bytes);
}

TEST_CASE("the overprovisioned share of the cap is compaction's: a full store still frees a dead segment", "[memory][l2]") {
  const double overprovision = GENERATE(0.25, 0.0);
  CAPTURE(overprovision);
  kvtest::TempDir dir("l2-overprovision");
  L2Config config = small_config(dir.path);
  config.max_bytes = 8u << 20;
  config.overprovision = overprovision;
  L2Store store(config);
  const std::size_t bytes = 64u << 10;
  std::vector<std::vector<std::byte>> pages;
  std::vector<L2Slot> slots;
  for (std::uint32_t i = 0;; ++i) {
    pages.push_back(page_bytes(bytes, i));
    const L2Slot slot = store.append(pages.back().data(), bytes, false);
    if (slot == kNoSlot) {
      pages.pop_back();
      if (!store.has_pending_writes()) break;
      REQUIRE(store.write_pending());
      continue;
    }
    slots.push_back(slot);
  }
  REQUIRE(store.write_pending(true));
  // Appends stop at the cap less the reserve: 6 MiB of 8, or all 8 without one.
  CHECK(store.full());
  CHECK(store.stats().disk_bytes == (overprovision > 0 ? 6u << 20 : 8u << 20));
  for (std::size_t i = 0; i < 64; ++i) {
    if (i % 4 != 0) store.release(slots[i]);  // 75% of the first segment dies
  }
  REQUIRE(store.compact());
  REQUIRE(store.write_pending(true));
  const L2Stats stats = store.stats();
  CHECK(stats.peak_disk_bytes <= config.max_bytes);
  if (overprovision > 0) {
    // The 16 live pages moved into the reserve, and the dead segment went.
    CHECK(stats.page_bytes_relocated == 16 * bytes);
    CHECK(stats.segments_deleted == 1);
    CHECK_FALSE(store.full());
  } else {
    // No room to relocate into: the store stays full of mostly dead segments.
    CHECK(stats.page_bytes_relocated == 0);
    CHECK(stats.segments_deleted == 0);
    CHECK(store.full());
  }
  std::vector<std::byte> out(bytes);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    if (i < 64 && i % 4 != 0) continue;
    store.read(slots[i], out.data());
    REQUIRE(out == pages[i]);
  }
}

TEST_CASE("an overprovision outside [0, 0.9] is refused naming the field", "[memory][l2]") {
  kvtest::TempDir dir("l2-overprovision-bad");
  L2Config bad = small_config(dir.path);
  bad.overprovision = 0.95;
  CHECK_THROWS_WITH(L2Store(bad), Catch::Contains("l2_overprovision") && Catch::Contains("[0, 0.9]"));
}
