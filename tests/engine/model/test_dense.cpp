// Dense layers through the BLAS (engine/model/dense.h) against a plain double-precision loop.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <thread>
#include <vector>

#include "model/dense.h"
#include "runtime/thread_pool.h"
#include "test_support.h"

using namespace kv;

namespace {

// |y - ref| within float rounding of a sum of in_dim products: a few ulps of sum |w| |x|.
void require_close(const std::vector<float>& x, int n, const std::vector<float>& w, int out_dim, int in_dim,
                   const std::vector<float>& got, const std::vector<float>& want) {
  for (int t = 0; t < n; ++t) {
    for (int i = 0; i < out_dim; ++i) {
      double magnitude = 0.0;
      for (int j = 0; j < in_dim; ++j) {
        magnitude += std::fabs(static_cast<double>(w[static_cast<std::size_t>(i) * in_dim + j]) * x[static_cast<std::size_t>(t) * in_dim + j]);
      }
      const std::size_t k = static_cast<std::size_t>(t) * out_dim + i;
      CAPTURE(t, i);
      REQUIRE(std::fabs(static_cast<double>(got[k]) - want[k]) <= 4.0 * 1.2e-7 * magnitude + 1e-30);
    }
  }
}

}  // namespace

TEST_CASE("dense_f32 matches the double-precision loop on random shapes, one token and many", "[model][dense]") {
  ThreadPool pool(2);
  std::mt19937 rng(77);
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 40; ++trial) {
    const int n = trial % 3 == 0 ? 1 : pick(2, 37);
    // Past kDenseParallelMacs now and then, and past one slice of output rows.
    const int out_dim = trial % 4 == 0 ? pick(kDenseSliceRows + 1, 3 * kDenseSliceRows + 7) : pick(1, 96);
    const int in_dim = trial % 5 == 0 ? pick(300, 700) : pick(1, 130);
    CAPTURE(trial, n, out_dim, in_dim);
    const auto x = kvtest::random_values(static_cast<std::size_t>(n) * in_dim, 1000u + static_cast<std::uint32_t>(trial));
    const auto w = kvtest::random_values(static_cast<std::size_t>(out_dim) * in_dim, 2000u + static_cast<std::uint32_t>(trial));
    std::vector<float> got(static_cast<std::size_t>(n) * out_dim, NAN), want(got.size());
    dense_f32(pool, x.data(), n, w.data(), out_dim, in_dim, got.data());
    dense_f32_ref(x.data(), n, w.data(), out_dim, in_dim, want.data());
    require_close(x, n, w, out_dim, in_dim, got, want);
  }
}

TEST_CASE("dense_f32 gives the same bits for any pool size, and from concurrent callers", "[model][dense]") {
  // Above the parallel threshold, several slices: the slices depend on the shape only.
  const int n = 5, out_dim = 3 * kDenseSliceRows + 17, in_dim = 300;
  REQUIRE(static_cast<std::size_t>(n) * out_dim * in_dim >= kDenseParallelMacs);
  const auto x = kvtest::random_values(static_cast<std::size_t>(n) * in_dim, 5);
  const auto w = kvtest::random_values(static_cast<std::size_t>(out_dim) * in_dim, 6);
  std::vector<float> one(static_cast<std::size_t>(n) * out_dim);
  {
    ThreadPool pool(1);
    dense_f32(pool, x.data(), n, w.data(), out_dim, in_dim, one.data());
  }
  for (int threads : {2, 3}) {
    ThreadPool pool(threads);
    std::vector<float> y(one.size());
    dense_f32(pool, x.data(), n, w.data(), out_dim, in_dim, y.data());
    CHECK(y == one);
  }
  // Four threads, each with its own pool, multiplying at once: the serial BLAS is called from
  // several threads (Debian builds it with locking), and each result must be the one above.
  std::vector<std::vector<float>> results(4, std::vector<float>(one.size()));
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      ThreadPool pool(2);
      for (int repeat = 0; repeat < 20; ++repeat) dense_f32(pool, x.data(), n, w.data(), out_dim, in_dim, results[static_cast<std::size_t>(c)].data());
    });
  }
  for (std::thread& t : callers) t.join();
  for (const auto& r : results) CHECK(r == one);
}
