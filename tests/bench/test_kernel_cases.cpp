// Every case of the kernel-case registry (bench/cases/kernel_cases.h) - the ones kvbench-micro
// times and the ones calibrate fits - run through the engine and held to the registry's error
// bound against exact attention on the unquantized values, and every dense case against the
// double-precision product. Contexts and query counts are cut to test size (a case's kernel
// path does not change with them: decode and verify keep their query counts, prefill runs two
// query blocks of the blocked kernel).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>

#include "attention/attention_ref.h"
#include "cases/kernel_cases.h"
#include "runtime/thread_pool.h"

using namespace kvbench::cases;

namespace {

std::vector<AttentionCase> all_attention_cases() {
  std::vector<AttentionCase> all = micro_attention_cases();
  for (bool quick : {false, true}) {
    const auto more = calibration_attention_cases(quick);
    all.insert(all.end(), more.begin(), more.end());
  }
  return all;
}

// The worst error over a case's shapes cut to test size.
double attention_error(const AttentionCase& c, unsigned seed) {
  const int queries = std::min(c.queries, 2 * 64);
  const int ctx = std::min(c.ctx, queries + 640);
  kv::KVCache cache(layer_config(c.format, ctx, 2));
  const std::size_t count = static_cast<std::size_t>(ctx) * kLayer.kv_heads * kLayer.head_dim;
  const auto k = case_values(count, seed, true), v = case_values(count, seed + 1, false);
  const kv::SeqId seq = cache.create_sequence();
  cache.append(seq, 0, k.data(), v.data(), ctx);
  const auto q = case_values(static_cast<std::size_t>(queries) * kLayer.q_heads * kLayer.head_dim, seed + 2, false);
  std::vector<float> got(q.size()), exact(q.size());
  cache.attend(seq, 0, q.data(), queries, got.data());
  const kv::AttentionShape shape{kLayer.q_heads, kLayer.kv_heads, kLayer.head_dim, cache.config().softmax_scale};
  kv::attention_ref(shape, q.data(), queries, k.data(), v.data(), ctx, exact.data());
  return relative_error(got, exact);
}

}  // namespace

TEST_CASE("Every attention case of the registry stays within its format's error bound", "[bench][kernel_cases]") {
  // One run per distinct (kind, format, query count): contexts are cut to test size anyway.
  std::set<std::tuple<int, int, int>> done;
  unsigned seed = 500;
  for (const AttentionCase& c : all_attention_cases()) {
    if (!done.insert({static_cast<int>(c.kind), static_cast<int>(c.format), c.queries}).second) continue;
    const double error = attention_error(c, seed += 10);
    CAPTURE(c.name(), error, attention_error_bound(c.format));
    CHECK(error <= attention_error_bound(c.format));
    // The bound is the format's: a tenth of it would be exceeded by the next coarser format.
    if (c.format != kv::Format::F32) CHECK(error > attention_error_bound(c.format) / 40.0);
  }
}

TEST_CASE("Every dense case of the registry is within its bound of the double-precision product", "[bench][kernel_cases]") {
  kv::ThreadPool pool(2);
  std::vector<DenseCase> all = micro_dense_cases();
  for (bool quick : {false, true}) {
    const auto calibration = calibration_dense_cases(quick);
    all.insert(all.end(), calibration.begin(), calibration.end());
  }
  unsigned seed = 900;
  for (const DenseCase& c : all) {
    // All of in_dim (the length of each sum), enough rows for several slices, few tokens.
    const int out_dim = 2 * kv::kDenseSliceRows + 3, tokens = std::min(c.tokens, 16);
    const auto values = case_values(static_cast<std::size_t>(out_dim) * c.in_dim, seed++, false);
    const kv::DenseMatrix w(c.format, static_cast<std::size_t>(out_dim), c.in_dim, kv::dense_encode(c.format, values.data(), static_cast<std::size_t>(out_dim), c.in_dim));
    const auto x = case_values(static_cast<std::size_t>(tokens) * c.in_dim, seed++, false);
    std::vector<float> got(static_cast<std::size_t>(tokens) * out_dim), want(got.size());
    kv::dense(pool, x.data(), tokens, w.view(0, out_dim), got.data());
    kv::dense_ref(x.data(), tokens, w.view(0, out_dim), want.data());
    const std::vector<float> widened = w.to_f32();
    double worst = 0.0;
    for (int t = 0; t < tokens; ++t) {
      for (int i = 0; i < out_dim; ++i) {
        double magnitude = 0.0;
        for (int j = 0; j < c.in_dim; ++j) {
          magnitude += std::fabs(static_cast<double>(widened[static_cast<std::size_t>(i) * c.in_dim + j]) * x[static_cast<std::size_t>(t) * c.in_dim + j]);
        }
        const std::size_t at = static_cast<std::size_t>(t) * out_dim + i;
        worst = std::max(worst, std::fabs(static_cast<double>(got[at]) - want[at]) / magnitude);
      }
    }
    CAPTURE(c.name(), worst, dense_error_bound(c));
    CHECK(worst <= dense_error_bound(c));
  }
}

TEST_CASE("The registry's names are unique and its calibration cases cover every format", "[bench][kernel_cases]") {
  std::set<std::string> names;
  for (const AttentionCase& c : micro_attention_cases()) CHECK(names.insert(c.name()).second);
  for (const SealCase& c : micro_seal_cases()) CHECK(names.insert(c.name()).second);
  for (const DenseCase& c : micro_dense_cases()) CHECK(names.insert(c.name()).second);
  CHECK(names.count("BM_DecodeAttention/q4/32768") == 1);
  CHECK(names.count("BM_VerifyAttention/q4/8/32768") == 1);
  CHECK(names.count("BM_PrefillAttention/f16/512/16384") == 1);
  CHECK(names.count("BM_DenseGemm/f32/4096/4096/512") == 1);
  CHECK(names.count("BM_DenseGemv/q8/4096/4096") == 1);
  for (bool quick : {false, true}) {
    std::set<std::pair<int, int>> kinds;  // (kind, format)
    for (const AttentionCase& c : calibration_attention_cases(quick)) {
      kinds.insert({static_cast<int>(c.kind), static_cast<int>(c.format)});
      CHECK(c.residency == Residency::TwoLayers);
    }
    CHECK(kinds.size() == 2 * std::size(kv::kAllFormats));
    CHECK(calibration_contexts(quick).size() == 3);
  }
}
