#include <catch2/catch.hpp>

#include <atomic>
#include <vector>

#include "runtime/error.h"
#include "runtime/thread_pool.h"

using namespace kv;

TEST_CASE("parallel_for runs every item exactly once", "[runtime]") {
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
