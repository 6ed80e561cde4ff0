// Dense layers through the BLAS (engine/model/dense.h) against a plain double-precision loop.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
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
  // Four threads, each with its own pool, multiplying at once: the BLAS is called from several
  // threads. Every result of every repeat must be the one above (Debian's serial OpenBLAS, which
  // has no locking, got about one in ten wrong here with its Haswell kernels).
  std::vector<int> wrong(4, 0);
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      ThreadPool pool(2);
      std::vector<float> r(one.size());
      for (int repeat = 0; repeat < 200; ++repeat) {
        dense_f32(pool, x.data(), n, w.data(), out_dim, in_dim, r.data());
        wrong[static_cast<std::size_t>(c)] += r != one;
      }
    });
  }
  for (std::thread& t : callers) t.join();
  CHECK(wrong == std::vector<int>(4, 0));
}

TEST_CASE("dense over f16 and q8 weights equals dense over their f32 values, bit for bit, and is near the reference", "[model][dense]") {
  ThreadPool pool(2);
  std::mt19937 rng(91);
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (DenseFormat format : {DenseFormat::F16, DenseFormat::Q8}) {
    for (int trial = 0; trial < 24; ++trial) {
      const int n = trial % 3 == 0 ? 1 : pick(2, 37);
      const int out_dim = trial % 4 == 0 ? pick(kDenseSliceRows + 1, 3 * kDenseSliceRows + 7) : pick(1, 96);
      // q8 rows are whole blocks of 32; odd lengths for f16 reach the conversion's scalar tail.
      const int in_dim = format == DenseFormat::Q8 ? kDenseQ8Block * pick(1, trial % 5 == 0 ? 20 : 4) : (trial % 5 == 0 ? pick(300, 700) : pick(1, 130));
      CAPTURE(dense_format_name(format), trial, n, out_dim, in_dim);
      const auto x = kvtest::random_values(static_cast<std::size_t>(n) * in_dim, 3000u + static_cast<std::uint32_t>(trial));
      const auto values = kvtest::random_values(static_cast<std::size_t>(out_dim) * in_dim, 4000u + static_cast<std::uint32_t>(trial));
      const DenseMatrix stored(format, static_cast<std::size_t>(out_dim), in_dim, dense_encode(format, values.data(), static_cast<std::size_t>(out_dim), in_dim));
      const std::vector<float> widened = stored.to_f32();
      // Encoding is the format's rounding: f16 within half an ulp, q8 within half a step of its block scale.
      for (std::size_t i = 0; i < values.size(); ++i) {
        double bound = std::fabs(values[i]) * 0x1p-11 + 0x1p-25;
        if (format == DenseFormat::Q8) {
          const std::size_t block = i / kDenseQ8Block * kDenseQ8Block;
          double amax = 0.0;
          for (int j = 0; j < kDenseQ8Block; ++j) amax = std::max(amax, std::fabs(static_cast<double>(values[block + j])));
          bound = amax / 127.0 * (0.5 + 127.0 * 0x1p-11) + 1e-30;  // half a step, and the f16-rounded scale
        }
        REQUIRE(std::fabs(static_cast<double>(widened[i]) - values[i]) <= bound);
      }
      std::vector<float> got(static_cast<std::size_t>(n) * out_dim, NAN), as_f32(got.size(), NAN), want(got.size());
      dense(pool, x.data(), n, stored.view(0, out_dim), got.data());
      dense_f32(pool, x.data(), n, widened.data(), out_dim, in_dim, as_f32.data());
      REQUIRE(got == as_f32);
      dense_ref(x.data(), n, stored.view(0, out_dim), want.data());
      require_close(x, n, widened, out_dim, in_dim, got, want);
    }
  }
}

TEST_CASE("A view of a stacked matrix multiplies the rows of its layer", "[model][dense]") {
  ThreadPool pool(1);
  const int layers = 3, rows = 40, cols = 64;
  const auto values = kvtest::random_values(static_cast<std::size_t>(layers) * rows * cols, 8);
  const DenseMatrix q8(DenseFormat::Q8, static_cast<std::size_t>(layers) * rows, cols,
                       dense_encode(DenseFormat::Q8, values.data(), static_cast<std::size_t>(layers) * rows, cols));
  const auto x = kvtest::random_values(cols, 9);
  const std::vector<float> all = q8.to_f32();
  std::vector<float> y(rows), want(rows);
  dense(pool, x.data(), 1, q8.view(2 * rows, rows), y.data());
  dense_f32_ref(x.data(), 1, all.data() + 2 * rows * cols, rows, cols, want.data());
  require_close(x, 1, std::vector<float>(all.begin() + 2 * rows * cols, all.end()), rows, cols, y, want);
  CHECK_THROWS(q8.view(2 * rows + 1, rows));
  CHECK_THROWS(DenseMatrix(DenseFormat::Q8, 1, 33, std::vector<std::byte>(35)));
}

TEST_CASE("OpenBLAS runs its AVX-512 kernels wherever the CPU has AVX-512", "[model][dense]") {
  const std::string core = dense_blas_core();
  CAPTURE(core);
  CHECK(!core.empty());
#if defined(__x86_64__)
  // Unless the environment forces a core (OPENBLAS_CORETYPE).
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
    CHECK((core == "SkylakeX" || core == "Cooperlake" || core == "SapphireRapids"));
  }
#endif
}
