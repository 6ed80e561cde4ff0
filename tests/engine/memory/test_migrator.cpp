#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <latch>
#include <mutex>
#include <thread>
#include <vector>

#include "memory/migrator.h"
#include "runtime/error.h"

using namespace kv;

namespace {

constexpr std::size_t kFrame = 64;
constexpr L2Slot kBlocking = 1;  // its read waits until the test opens the gate
constexpr L2Slot kBad = 9;       // its read fails like a checksum mismatch
constexpr int kWrite = -1;       // the write callback, in the log

using State = Migrator::Load::State;

// A page record as the pool keeps one: the load, the version and the frame.
struct TestPage {
  Migrator::Load load;
  std::atomic<std::uint32_t> version{0};
  std::vector<std::byte> frame = std::vector<std::byte>(kFrame);
};

Migrator::Job job(TestPage& page, L2Slot slot, L2Location where = {}) {
  return {&page.load, &page.version, slot, page.frame.data(), where};
}
// Slot s of the fake device lies at s * kSlotBytes in segment 0 (the migrator joins by these
// locations; the fake reads kFrame bytes whatever they say).
constexpr std::uint32_t kSlotBytes = 128u << 10;  // wider than kMaxJoinGap: only neighbours join
L2Location at_slot(L2Slot slot) { return {0, std::uint64_t{slot} * kSlotBytes, kSlotBytes}; }

// Stands in for the L2 store: logs what the migrator ran, in order. Ordering comes from
// blocking, never from time: the read of kBlocking says it started and waits for the gate.
struct FakeStore {
  std::latch started{1}, gate{1}, written{1};
  std::mutex mutex;
  std::vector<int> log;
  std::atomic<int> writes{0};

  std::vector<std::vector<L2Slot>> runs;  // the slots of each joined read

  MigratorIo io() {
    return {[this](L2Slot slot, std::byte* frame) { read(slot, frame); }, [this] { write(); },
            [this](const std::vector<L2Slot>& slots, const std::vector<std::byte*>& frames) {
              {
                std::lock_guard lock(mutex);
                runs.push_back(slots);
              }
              std::vector<std::string> errors(slots.size());
              for (std::size_t i = 0; i < slots.size(); ++i) {
                try {
                  read(slots[i], frames[i]);
                } catch (const InputError& e) {
                  errors[i] = e.what();
                }
              }
              return errors;
            }};
  }
  void read(L2Slot slot, std::byte* frame) {
    if (slot == kBlocking) {
      started.count_down();
      gate.wait();
    }
    if (slot == kBad) throw InputError("segment-0.l2", "page 9", "checksum mismatch");
    std::memset(frame, static_cast<int>(slot), kFrame);
    std::lock_guard lock(mutex);
    log.push_back(static_cast<int>(slot));
  }
  void write() {
    {
      std::lock_guard lock(mutex);
      log.push_back(kWrite);
    }
    if (writes.fetch_add(1) == 0) written.count_down();
  }
  std::vector<int> ran() {
    std::lock_guard lock(mutex);
    return log;
  }
};

bool holds(const TestPage& page, L2Slot slot) {
  for (std::byte b : page.frame) {
    if (b != static_cast<std::byte>(slot)) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("settle cancels a queued prefetch, which never runs, and waits for a running load", "[memory][migrator]") {
  FakeStore store;
  Migrator migrator(store.io());
  TestPage running, prefetched;
  migrator.enqueue(job(running, kBlocking), Migrator::LoadKind::Demand);
  store.started.wait();  // the thread is inside the blocking read: the prefetch stays queued
  migrator.enqueue(job(prefetched, 2), Migrator::LoadKind::Prefetch);
  migrator.settle(prefetched.load);
  CHECK(prefetched.load.state == State::None);
  store.gate.count_down();
  migrator.settle(running.load);
  CHECK(running.load.state == State::None);
  migrator.stop();
  CHECK(store.ran() == std::vector<int>{kBlocking});
  CHECK(running.version.load() == 2);  // odd while written, even after
  CHECK(prefetched.version.load() == 0);
  CHECK(holds(running, kBlocking));
}

TEST_CASE("wait returns once a running load has written its frame, and consume marks it seen", "[memory][migrator]") {
  FakeStore store;
  Migrator migrator(store.io());
  TestPage page;
  migrator.enqueue(job(page, kBlocking), Migrator::LoadKind::Demand);
  store.started.wait();
  {
    const auto lock = migrator.lock();
    CHECK(page.load.state == State::Running);
    CHECK(page.version.load() % 2 == 1);
  }
  std::thread opener([&] { store.gate.count_down(); });
  migrator.wait(page.load);
  opener.join();
  CHECK(page.load.state == State::Done);  // left for consume()
  CHECK(page.version.load() == 2);
  CHECK(holds(page, kBlocking));
  CHECK(migrator.consume(page.load).empty());
  CHECK(page.load.state == State::None);
  CHECK_FALSE(migrator.wait(page.load).has_value());  // nothing in flight: no wait
}

TEST_CASE("demand loads run before queued prefetches", "[memory][migrator]") {
  FakeStore store;
  Migrator migrator(store.io());
  TestPage first, p1, p2, d1, d2;
  migrator.enqueue(job(first, kBlocking), Migrator::LoadKind::Demand);
  store.started.wait();
  migrator.enqueue(job(p1, 11), Migrator::LoadKind::Prefetch);
  migrator.enqueue(job(p2, 12), Migrator::LoadKind::Prefetch);
  migrator.enqueue(job(d1, 21), Migrator::LoadKind::Demand);
  migrator.enqueue(job(d2, 22), Migrator::LoadKind::Demand);
  store.gate.count_down();
  for (TestPage* page : {&first, &d1, &d2, &p1, &p2}) {
    migrator.wait(page->load);
    CHECK(migrator.consume(page->load).empty());
  }
  CHECK(store.ran() == std::vector<int>{kBlocking, 21, 22, 11, 12});
}

TEST_CASE("the store's writes run on their own thread: never queued behind a read, nor a read behind them", "[memory][migrator]") {
  FakeStore store;
  Migrator migrator(store.io());
  TestPage blocked;
  migrator.enqueue(job(blocked, kBlocking), Migrator::LoadKind::Demand);
  store.started.wait();  // the only reader is inside a read that cannot end yet
  migrator.writes_ready();
  store.written.wait();  // so this returns only because the write ran beside it
  store.gate.count_down();
  migrator.wait(blocked.load);
  CHECK(migrator.consume(blocked.load).empty());
  CHECK(store.ran() == std::vector<int>{kWrite, kBlocking});
}

TEST_CASE("with two readers a blocked read does not hold the queue", "[memory][migrator]") {
  FakeStore store;
  Migrator migrator(store.io(), 2);
  TestPage blocked, other;
  migrator.enqueue(job(blocked, kBlocking), Migrator::LoadKind::Demand);
  store.started.wait();
  migrator.enqueue(job(other, 21), Migrator::LoadKind::Demand);
  migrator.wait(other.load);  // returns while the first read still waits for the gate
  CHECK(holds(other, 21));
  CHECK(store.ran() == std::vector<int>{21});
  store.gate.count_down();
  migrator.wait(blocked.load);
  CHECK(holds(blocked, kBlocking));
}

TEST_CASE("a reader joins the queued pages that follow its page on the device, up to max_read_bytes", "[memory][migrator]") {
  FakeStore store;
  Migrator migrator(store.io(), 1, 3 * kSlotBytes);
  TestPage first;
  std::vector<TestPage> pages(6);
  migrator.enqueue(job(first, kBlocking), Migrator::LoadKind::Demand);
  store.started.wait();
  // Queued out of order: 31 is popped first and 30, 32 and 33 lie around it; three pages are
  // the limit. 40 lies elsewhere, 50 in another segment.
  const L2Slot slots[] = {31, 40, 30, 32, 33, 50};
  for (std::size_t i = 0; i < pages.size(); ++i) {
    L2Location where = at_slot(slots[i]);
    if (slots[i] == 50) where.segment = 1;
    migrator.enqueue(job(pages[i], slots[i], where), Migrator::LoadKind::Prefetch);
  }
  store.gate.count_down();
  // Polled, not wait()ed: wait() would move a queued page to the demand queue on its own.
  for (bool done = false; !done;) {
    std::this_thread::yield();
    const auto lock = migrator.lock();
    done = std::all_of(pages.begin(), pages.end(), [](const TestPage& page) { return page.load.state == State::Done; });
  }
  for (std::size_t i = 0; i < pages.size(); ++i) {
    CHECK(migrator.consume(pages[i].load).empty());
    CHECK(holds(pages[i], slots[i]));
  }
  migrator.stop();
  std::lock_guard lock(store.mutex);
  REQUIRE(store.runs.size() == 1);
  CHECK(store.runs.front() == std::vector<L2Slot>{30, 31, 32});  // by offset; 30 is met first in the queue
}

TEST_CASE("waiting for a queued prefetch runs it", "[memory][migrator]") {
  FakeStore store;
  Migrator migrator(store.io());
  TestPage first, p1, p2;
  migrator.enqueue(job(first, kBlocking), Migrator::LoadKind::Demand);
  store.started.wait();
  migrator.enqueue(job(p1, 11), Migrator::LoadKind::Prefetch);
  migrator.enqueue(job(p2, 12), Migrator::LoadKind::Prefetch);
  // Which of p1 and p2 runs first depends on when wait() promotes p2: only the outcome is checked.
  std::thread opener([&] { store.gate.count_down(); });
  migrator.wait(p2.load);
  opener.join();
  CHECK(p2.load.state == State::Done);
  CHECK(holds(p2, 12));
  migrator.settle(p1.load);
  CHECK(p1.load.state == State::None);
}

TEST_CASE("a failed read leaves the load Failed with the store's error, reported once", "[memory][migrator]") {
  FakeStore store;
  Migrator migrator(store.io());
  TestPage page;
  migrator.enqueue(job(page, kBad), Migrator::LoadKind::Demand);
  migrator.wait(page.load);
  CHECK(page.load.state == State::Failed);
  CHECK(page.version.load() == 2);
  const std::string error = migrator.consume(page.load);
  CHECK_THAT(error, Catch::Contains("checksum mismatch"));
  CHECK(page.load.state == State::None);
  CHECK(migrator.consume(page.load).empty());
}

TEST_CASE("stop drops the queued jobs, lets the running load finish and joins", "[memory][migrator]") {
  FakeStore store;
  Migrator migrator(store.io());
  TestPage running, demand, prefetch;
  migrator.enqueue(job(running, kBlocking), Migrator::LoadKind::Demand);
  store.started.wait();
  migrator.enqueue(job(demand, 21), Migrator::LoadKind::Demand);
  migrator.enqueue(job(prefetch, 11), Migrator::LoadKind::Prefetch);
  // The gate opens only once stop() has dropped the queue (the dropped loads read None).
  std::thread opener([&] {
    for (;;) {
      {
        const auto lock = migrator.lock();
        if (demand.load.state == State::None) break;
      }
      std::this_thread::yield();
    }
    store.gate.count_down();
  });
  migrator.stop();
  opener.join();
  CHECK(store.ran() == std::vector<int>{kBlocking});
  CHECK(running.load.state == State::Done);
  CHECK(prefetch.load.state == State::None);
  CHECK(demand.version.load() == 0);
  migrator.settle(demand.load);  // nothing in flight: returns at once
  migrator.stop();               // idempotent
}

TEST_CASE("a synchronous migrator runs each load as it is queued, and writes at once, on the calling thread", "[memory][migrator]") {
  FakeStore store;
  TestPage demand, prefetch, bad;
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id reader;
  MigratorIo io = store.io();
  const auto read = io.read;
  io.read = [&](L2Slot slot, std::byte* frame) {
    reader = std::this_thread::get_id();
    read(slot, frame);
  };
  Migrator traced(io, 0);  // L2Config::synchronous
  traced.enqueue(job(demand, 3), Migrator::LoadKind::Demand);
  CHECK(reader == caller);
  CHECK(demand.load.state == State::Done);  // already read: nothing in flight to wait for
  CHECK(demand.version.load() == 2);
  CHECK(holds(demand, 3));
  CHECK_FALSE(traced.wait(demand.load).has_value());
  CHECK(traced.consume(demand.load).empty());
  traced.enqueue(job(prefetch, 4), Migrator::LoadKind::Prefetch);
  CHECK(prefetch.load.state == State::Done);
  traced.settle(prefetch.load);
  CHECK(prefetch.load.state == State::None);
  traced.enqueue(job(bad, kBad), Migrator::LoadKind::Demand);
  CHECK(bad.load.state == State::Failed);
  CHECK(traced.consume(bad.load).find("checksum mismatch") != std::string::npos);
  traced.writes_ready();
  CHECK(store.writes.load() == 1);  // before writes_ready returned
  CHECK(store.ran() == std::vector<int>{3, 4, kWrite});
  traced.stop();  // no threads to join
}
