#include <catch2/catch.hpp>

#include <atomic>
#include <numeric>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/error.h"
#include "runtime/thread_limit.h"
#include "runtime/thread_pool.h"
#include "runtime/work_clock.h"
#include "test_support.h"

using namespace kv;

TEST_CASE("parallel_for runs every item exactly once", "[runtime]") {
  // Pools past twice this machine's cores too (the limit raised), which do not poll.
  const kvtest::ScopedEnv limit("KVBENCH_MAX_THREADS", "64");
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    CHECK(pool.size() == threads);
    for (std::size_t n : {0u, 1u, 2u, 7u, 100u, 1000u}) {
      CAPTURE(threads, n);
      std::vector<std::atomic<int>> hits(n);
      for (auto& h : hits) h = 0;
      pool.parallel_for(n, [&](std::size_t i) { hits[i].fetch_add(1); });
      for (std::size_t i = 0; i < n; ++i) REQUIRE(hits[i].load() == 1);
    }
  }
}

TEST_CASE("A pool is reusable many times in a row", "[runtime]") {
  ThreadPool pool(3);
  std::atomic<long> total{0};
  for (int round = 0; round < 500; ++round) {
    pool.parallel_for(5, [&](std::size_t i) { total += static_cast<long>(i); });
  }
  CHECK(total.load() == 500L * 10L);
}

TEST_CASE("Thread count 0 means all cores, negative is refused", "[runtime]") {
  ThreadPool pool(0);
  CHECK(pool.size() >= 1);
  CHECK_THROWS_AS(ThreadPool(-1), InputError);
}

TEST_CASE("the background task runs beside the loops, one at a time, and its error reaches the waiter", "[runtime][threads]") {
  ThreadPool pool(2);
  pool.wait_background();  // nothing started: returns at once
  std::atomic<int> runs{0};
  std::vector<int> order;
  for (int i = 0; i < 50; ++i) {
    // A second start waits for the first: the tasks never overlap and run in order.
    pool.start_background([&, i] {
      order.push_back(i);
      ++runs;
    });
    std::vector<int> items(8, 0);
    pool.parallel_for(items.size(), [&](std::size_t k) { items[k] = 1; });  // loops run meanwhile
    CHECK(std::accumulate(items.begin(), items.end(), 0) == 8);
  }
  pool.wait_background();
  CHECK(runs == 50);
  std::vector<int> expected(50);
  std::iota(expected.begin(), expected.end(), 0);
  CHECK(order == expected);

  pool.start_background([] { throw std::runtime_error("copy failed"); });
  CHECK_THROWS_WITH(pool.wait_background(), "copy failed");
  pool.wait_background();  // the error is handed over once
  pool.start_background([&] { ++runs; });  // and the thread still serves
  pool.wait_background();
  CHECK(runs == 51);
}

TEST_CASE("the background task's CPU time is engine work", "[runtime][threads]") {
  ThreadPool pool(1);
  const WorkStamp before = engine_work();
  pool.start_background([] { burn_cpu_ns(20'000'000); });
  pool.wait_background();
  CHECK((engine_work() - before).cpu_ns >= 20'000'000u);
}

TEST_CASE("a pool runs its last background task before it shuts down", "[runtime][threads]") {
  std::atomic<bool> ran{false};
  {
    ThreadPool pool(1);
    pool.start_background([&] { ran = true; });
  }
  CHECK(ran);
}

TEST_CASE("a pool with an inline background runs the task at once on the caller's thread, its error kept for the waiter", "[runtime]") {
  kv::ThreadPool pool(1, kv::ThreadPool::Background::Inline);
  std::thread::id ran_on;
  int runs = 0;
  pool.start_background([&] {
    ran_on = std::this_thread::get_id();
    ++runs;
  });
  CHECK(runs == 1);  // before start_background returned
  CHECK(ran_on == std::this_thread::get_id());
  pool.wait_background();
  pool.start_background([] { throw std::runtime_error("copy failed"); });
  CHECK_THROWS_WITH(pool.wait_background(), "copy failed");
  pool.wait_background();  // handed over once
}

TEST_CASE("a pool past the thread limit is refused before a thread starts, KVBENCH_MAX_THREADS moves the limit", "[runtime]") {
  const int limit = 2 * hardware_threads();
  {
    const kvtest::ScopedEnv unset("KVBENCH_MAX_THREADS", "");
    ::unsetenv("KVBENCH_MAX_THREADS");
    CHECK(max_pool_threads() == limit);
    CHECK(thread_count_problem(limit).empty());
    CHECK(thread_count_problem(0).empty());
    CHECK(thread_count_problem(limit + 1).find("more than twice this machine's") != std::string::npos);
    CHECK(thread_count_problem(-1).find("below 0") != std::string::npos);
    CHECK(thread_count_problem(100000) == "100000 is not in 0..4096");
    CHECK_THROWS_AS(ThreadPool(limit + 1), InputError);
    ThreadPool all(0);
    CHECK(all.size() == hardware_threads());
  }
  {
    const kvtest::ScopedEnv raised("KVBENCH_MAX_THREADS", std::to_string(limit + 2));
    CHECK(thread_count_problem(limit + 2).empty());
    CHECK(thread_count_problem(limit + 3).find("more than KVBENCH_MAX_THREADS (" + std::to_string(limit + 2) + ")") != std::string::npos);
    ThreadPool pool(limit + 2);
    CHECK(pool.size() == limit + 2);
  }
  {
    const kvtest::ScopedEnv lowered("KVBENCH_MAX_THREADS", "1");
    ThreadPool all(0);  // "all cores" within the limit
    CHECK(all.size() == 1);
  }
  for (const char* bad : {"0", "-3", "many", "4097", ""}) {
    const kvtest::ScopedEnv env("KVBENCH_MAX_THREADS", bad);
    CAPTURE(bad);
    CHECK_THROWS_AS(max_pool_threads(), InputError);
  }
}
