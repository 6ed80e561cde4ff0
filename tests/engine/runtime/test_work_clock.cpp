// The engine's work clock: CPU time of the pool's items on every thread, the caller's serial
// work, nothing of the waiting between them; test_slowdown's inflation in CPU time; and, under
// real contention (a process spinning on the same core), CPU time that does not grow while wall
// time does.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "runtime/thread_pool.h"
#include "runtime/work_clock.h"
#include "test_support.h"

using namespace kv;

namespace {

constexpr std::uint64_t kMs = 1000000;

double ms(std::uint64_t ns) { return static_cast<double>(ns) * 1e-6; }

double wall_ms_of(const std::function<void()>& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

TEST_CASE("engine_work counts the CPU time of items on every pool thread and the caller's serial work", "[runtime]") {
  for (int threads : {1, 2, 4}) {
    CAPTURE(threads);
    ThreadPool pool(threads);
    const WorkStamp before = engine_work();
    burn_cpu_ns(2 * kMs);  // serial work on the caller
    pool.parallel_for(8, [](std::size_t) { burn_cpu_ns(2 * kMs); });
    const double got = ms((engine_work() - before).cpu_ns);
    CAPTURE(got);
    CHECK(got >= 18.0);
    CHECK(got <= 18.0 + 6.0);  // clock reads and the pool's bookkeeping, not its waiting
  }
}

TEST_CASE("waiting for a slow item is not engine work", "[runtime]") {
  ThreadPool pool(2);
  const WorkStamp before = engine_work();
  double wall = 0.0;
  // One item sleeps (an I/O wait, say): the other thread's wait for it is polling and sleeping.
  wall = wall_ms_of([&] {
    pool.parallel_for(2, [](std::size_t i) {
      if (i == 0) std::this_thread::sleep_for(std::chrono::milliseconds(40));
      if (i == 1) burn_cpu_ns(1 * kMs);
    });
  });
  const double got = ms((engine_work() - before).cpu_ns);
  CAPTURE(got, wall);
  CHECK(wall >= 40.0);
  CHECK(got >= 1.0);
  // The 1 ms burnt, plus the waiter's polling before it sleeps, which an instrumented build on a
  // busy machine stretches: far below the 40 ms a spinning wait would count.
  CHECK(got <= 12.0);
}

TEST_CASE("work inflation makes every thread do its items' CPU time again", "[runtime]") {
  ThreadPool pool(2);
  pool.set_work_inflation(0.5);
  const WorkStamp before = engine_work();
  pool.parallel_for(6, [](std::size_t) { burn_cpu_ns(2 * kMs); });
  pool.set_work_inflation(0.0);
  const double got = ms((engine_work() - before).cpu_ns);
  CAPTURE(got);
  CHECK(got >= 6 * 2.0 * 1.5);
  CHECK(got <= 6 * 2.0 * 1.5 + 6.0);
  // Off again: the same items cost their own time only.
  const WorkStamp again = engine_work();
  pool.parallel_for(6, [](std::size_t) { burn_cpu_ns(2 * kMs); });
  CHECK(ms((engine_work() - again).cpu_ns) <= 12.0 + 6.0);
}

TEST_CASE("instructions are counted, or the reason is given", "[runtime]") {
  if (instructions_counted()) {
    ThreadPool pool(2);
    const WorkStamp before = engine_work();
    pool.parallel_for(4, [](std::size_t) { burn_cpu_ns(1 * kMs); });
    CHECK((engine_work() - before).instructions > 100000);
  } else {
    CAPTURE(instructions_unavailable_reason());
    CHECK(!instructions_unavailable_reason().empty());
    CHECK((engine_work() - engine_work()).instructions == 0);
  }
}

// Real contention: hidden from CTest's parallel run and run alone by ci/test.sh's contention step.
TEST_CASE("a process spinning on the same core lengthens wall time but not the engine's CPU time", "[.][contention]") {
  kvtest::PinnedThread pin(0);
  REQUIRE(pin.pinned);
  ThreadPool pool(1);  // the work stays on this (pinned) thread
  // A fixed job: arithmetic with a small working set, as a busy neighbour cannot make longer.
  const auto job = [&] {
    pool.parallel_for(1, [](std::size_t) {
      volatile double x = 1.0;
      for (int i = 0; i < 40000000; ++i) x = x * 1.0000001 + 1e-9;
    });
  };
  job();  // warm
  const WorkStamp idle_start = engine_work();
  const double idle_wall = wall_ms_of(job);
  const double idle_cpu = ms((engine_work() - idle_start).cpu_ns);
  double busy_wall = 0.0, busy_cpu = 0.0;
  {
    kvtest::BusyCore busy(0, 60);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const WorkStamp busy_start = engine_work();
    busy_wall = wall_ms_of(job);
    busy_cpu = ms((engine_work() - busy_start).cpu_ns);
  }
  CAPTURE(idle_wall, idle_cpu, busy_wall, busy_cpu);
  CHECK(busy_wall >= 1.5 * busy_cpu);         // it shared its core
  CHECK(busy_cpu <= 1.2 * idle_cpu);          // and its CPU time did not grow with that
  CHECK(busy_cpu >= 0.8 * idle_cpu);
}
