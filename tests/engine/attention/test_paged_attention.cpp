#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "attention/int_dot.h"
#include "attention/paged_attention.h"
#include "quant/quantizer.h"
#include "engine/attention/random_pages.h"
#include "int_twin.h"
#include "test_support.h"
#include "test_support.h"

using namespace kv;
using kvtest::RandomPages;
using kvtest::random_pages;

TEST_CASE("Paged attention equals dense reference attention on the gathered pages", "[attention]") {
  std::uint32_t seed = 77;
  ThreadPool pool(2);
  AttentionWorkspace workspace;
  struct Shape { int q_heads, kv_heads, dim, page_tokens, ctx, n_queries; };
  const Shape shapes[] = {
      {8, 1, 8, 16, 3 * 16 + 1, 1},   {8, 8, 64, 16, 100, 1},   {32, 4, 128, 64, 1000, 1},
      {4, 2, 8, 16, 5 * 16 + 1, 17},  {6, 2, 24, 32, 200, 40},  {16, 2, 128, 64, 300, 64},
      {2, 2, 256, 256, 600, 1},       {4, 1, 64, 16, 16, 16},   {8, 2, 64, 48, 400, 150},
  };
  // The pages and the float reference are the same for every ISA: built once per case.
  for (Format f : kAllFormats) {
    for (const Shape& s : shapes) {
      const RandomPages kv = random_pages(f, s.kv_heads, s.dim, s.page_tokens, s.ctx, seed);
      seed += 1000;
      const AttentionShape shape{s.q_heads, s.kv_heads, s.dim, 1.0f / std::sqrt(static_cast<float>(s.dim))};
      const auto q = kvtest::random_values(static_cast<std::size_t>(s.n_queries) * s.q_heads * s.dim, seed++);
      const DenseKV dense = gather_pages_ref(shape, kv.views);
      REQUIRE(dense.ctx == s.ctx);
      std::vector<float> reference;
      for (Isa isa : kvtest::tested_isas()) {
        CAPTURE(isa_name(isa), format_name(f), s.q_heads, s.kv_heads, s.dim, s.page_tokens, s.ctx, s.n_queries);
        std::vector<float> got(q.size()), want(q.size());
        PagedAttentionArgs args;
        args.shape = shape;
        args.pages = &kv.views;
        args.q = q.data();
        args.n_queries = s.n_queries;
        args.out = got.data();
        args.split_pages = 3;
        paged_attention(page_kernels(isa), pool, args, workspace);
        // Decode (and verification, a multi-query decode) on q4 takes integer dot products on SIMD
        // paths (int_dot.h): it is checked against the kernels' integer twin, which reproduces it
        // up to the rare weight that rounds the other way (test_page_kernels.cpp bounds that per
        // page).
        const IntDotPaths paths = isa == Isa::Scalar || s.n_queries > kMaxVerifyQueries ? IntDotPaths{} : int_dot_paths(kv.layout, isa);
        if (paths.k || paths.v) {
          args.out = want.data();
          paged_attention(kvtest::twin_kernels(isa), pool, args, workspace);
          // A flipped weight moves one head's channels by at most midpoint * s / sum(p) of its
          // page, a fraction of a percent of the output's scale here.
          REQUIRE(kvtest::relative_error(got, want) < 5e-3f);
          continue;
        }
        if (reference.empty()) {
          reference.resize(q.size());
          attention_ref(shape, q.data(), s.n_queries, dense.k.data(), dense.v.data(), dense.ctx, reference.data());
        }
        REQUIRE(kvtest::relative_error(got, reference) < 2e-5f);
      }
    }
  }
}

TEST_CASE("Paged attention is bit-identical whatever the thread count", "[attention]") {
  const RandomPages kv = random_pages(Format::Q4, 4, 64, 16, 777, 5);
  const AttentionShape shape{16, 4, 64, 0.125f};
  for (int n_queries : {1, 33}) {
    const auto q = kvtest::random_values(static_cast<std::size_t>(n_queries) * 16 * 64, 9);
    std::vector<float> first;
    const kvtest::ScopedEnv limit("KVBENCH_MAX_THREADS", "64");  // 5 threads past a 2-core machine's limit
    for (int threads : {1, 2, 3, 5}) {
      ThreadPool pool(threads);
      AttentionWorkspace workspace;
      std::vector<float> out(q.size());
      PagedAttentionArgs args;
      args.shape = shape;
      args.pages = &kv.views;
      args.q = q.data();
      args.n_queries = n_queries;
      args.out = out.data();
      paged_attention(page_kernels(best_isa()), pool, args, workspace);
      if (first.empty()) {
        first = out;
      } else {
        CAPTURE(threads, n_queries);
        REQUIRE(std::memcmp(first.data(), out.data(), out.size() * sizeof(float)) == 0);
      }
    }
  }
}

TEST_CASE("Paged attention in waves of resident pages is bit-identical to one pass, and reads only held pages",
          "[attention]") {
  ThreadPool pool(2);
  for (Isa isa : kvtest::tested_isas()) {
    for (Format f : {Format::F16, Format::Q4, Format::Q8}) {
      for (int n_queries : {1, 33}) {
        for (std::size_t wave_pages : {1, 3, 7}) {
          CAPTURE(isa_name(isa), format_name(f), n_queries, wave_pages);
          const int kv_heads = 4, q_heads = 8, dim = 64, page_tokens = 16, ctx = 16 * 20 + 5;
          RandomPages kv = random_pages(f, kv_heads, dim, page_tokens, ctx, 31);
          for (auto& head : kv.views) {
            for (std::size_t p = 0; p < head.size(); ++p) head[p].first_token = static_cast<int>(p) * page_tokens;
          }
          const AttentionShape shape{q_heads, kv_heads, dim, 0.125f};
          const auto q = kvtest::random_values(static_cast<std::size_t>(n_queries) * q_heads * dim, 3);
          const std::size_t positions = kv.views[0].size();
          PagedAttentionArgs args;
          args.shape = shape;
          args.q = q.data();
          args.n_queries = n_queries;
          args.split_pages = 4;
          args.context_tokens = ctx;
          std::vector<float> whole_out(q.size()), waves_out(q.size());
          std::vector<float> whole_lse(static_cast<std::size_t>(n_queries) * q_heads), waves_lse(whole_lse.size());
          std::vector<float> whole_page_lse(positions * kv_heads * 2), waves_page_lse(whole_page_lse.size());
          AttentionWorkspace ws;
          args.pages = &kv.views;
          args.out = whole_out.data();
          args.query_lse = whole_lse.data();
          if (n_queries == 1) args.page_lse = whole_page_lse.data();
          paged_attention(page_kernels(isa), pool, args, ws);

          // The same pages, resident only while their wave is held.
          std::vector<std::vector<PageView>> streamed = kv.views;
          for (auto& head : streamed) {
            for (PageView& page : head) page.data = nullptr;
          }
          PageWaves waves;
          waves.max_bytes = wave_pages * kv_heads * kv.layout.bytes;
          waves.bytes = [&](std::size_t) { return static_cast<std::size_t>(kv_heads) * kv.layout.bytes; };
          std::size_t held_begin = 0, held_end = 0, waves_run = 0;
          waves.acquire = [&](std::size_t begin, std::size_t end) {
            REQUIRE(end > begin);
            REQUIRE((end - begin) * kv_heads * kv.layout.bytes <= std::max(waves.max_bytes, kv_heads * kv.layout.bytes));
            REQUIRE(begin == held_end);  // waves cover the positions in order, once
            held_begin = begin;
            held_end = end;
            ++waves_run;
            for (std::size_t h = 0; h < streamed.size(); ++h) {
              for (std::size_t p = begin; p < end; ++p) streamed[h][p].data = kv.views[h][p].data;
            }
          };
          waves.release = [&] {
            for (auto& head : streamed) {
              for (std::size_t p = held_begin; p < held_end; ++p) head[p].data = nullptr;
            }
          };
          AttentionWorkspace ws2;
          args.pages = &streamed;
          args.out = waves_out.data();
          args.query_lse = waves_lse.data();
          if (n_queries == 1) args.page_lse = waves_page_lse.data();
          args.waves = &waves;
          paged_attention(page_kernels(isa), pool, args, ws2);
          CHECK(held_end == positions);
          CHECK(waves_run == (positions + wave_pages - 1) / wave_pages);
          REQUIRE(std::memcmp(whole_out.data(), waves_out.data(), whole_out.size() * sizeof(float)) == 0);
          REQUIRE(std::memcmp(whole_lse.data(), waves_lse.data(), whole_lse.size() * sizeof(float)) == 0);
          REQUIRE(std::memcmp(whole_page_lse.data(), waves_page_lse.data(), whole_page_lse.size() * sizeof(float)) == 0);
        }
      }
    }
  }
}

TEST_CASE("Verification gives each query what a decode step at its position gives, on all pages and on a shared subset",
          "[attention]") {
  // k draft queries at the sequence's end, causal among themselves: query j sees the first
  // ctx - k + j + 1 tokens. A sparse plan is one subset shared by all k queries (pages with
  // their first positions), the diagonal's pages included.
  std::uint32_t seed = 900;
  ThreadPool pool(2);
  AttentionWorkspace workspace;
  const int q_heads = 8, kv_heads = 2, dim = 64, page_tokens = 16, ctx = 7 * 16 + 5;
  const AttentionShape shape{q_heads, kv_heads, dim, 1.0f / std::sqrt(static_cast<float>(dim))};
  for (Isa isa : kvtest::tested_isas()) {
    for (Format f : {Format::F32, Format::F16, Format::Q8, Format::Q4}) {
      for (int k : {2, 5, 16}) {
        for (bool subset : {false, true}) {
          CAPTURE(isa_name(isa), format_name(f), k, subset);
          const RandomPages kv = random_pages(f, kv_heads, dim, page_tokens, ctx, seed);
          seed += 100;
          std::vector<std::vector<PageView>> views(kv_heads);
          for (int h = 0; h < kv_heads; ++h) {
            for (std::size_t p = 0; p < kv.views[h].size(); ++p) {
              if (subset && (p == 1 || p == 3 || p == 4)) continue;
              PageView view = kv.views[h][p];
              view.first_token = static_cast<int>(p) * page_tokens;
              views[h].push_back(view);
            }
          }
          const auto q = kvtest::random_values(static_cast<std::size_t>(k) * q_heads * dim, seed++);
          std::vector<float> got(q.size()), want(q.size());
          PagedAttentionArgs args;
          args.shape = shape;
          args.pages = &views;
          args.q = q.data();
          args.n_queries = k;
          args.out = got.data();
          args.split_pages = 3;
          args.context_tokens = ctx;
          paged_attention(page_kernels(isa), pool, args, workspace);
          for (int j = 0; j < k; ++j) {
            // The decode step of query j: the same pages up to its position, the last one cut.
            const int seen = ctx - k + j + 1;
            std::vector<std::vector<PageView>> prefix(kv_heads);
            for (int h = 0; h < kv_heads; ++h) {
              for (PageView view : views[h]) {
                view.tokens = std::min(view.tokens, seen - view.first_token);
                if (view.tokens > 0) prefix[h].push_back(view);
              }
            }
            PagedAttentionArgs step = args;
            step.pages = &prefix;
            step.q = q.data() + static_cast<std::size_t>(j) * q_heads * dim;
            step.n_queries = 1;
            step.out = want.data() + static_cast<std::size_t>(j) * q_heads * dim;
            step.context_tokens = seen;
            paged_attention(page_kernels(isa), pool, step, workspace);
          }
          REQUIRE(kvtest::relative_error(got, want) < 1e-5f);
        }
      }
    }
  }
}

namespace {

// The scalar kernels, counting their calls (a planted slowdown must run them more often).
std::atomic<int> g_decode_calls{0}, g_prefill_calls{0};
void counting_decode(const PageView& page, const float* q, int group, float* states, float* page_lse) {
  ++g_decode_calls;
  page_kernels(Isa::Scalar).decode_page(page, q, group, states, page_lse);
}
void counting_prefill(const PrefillPageArgs& args) {
  ++g_prefill_calls;
  page_kernels(Isa::Scalar).prefill_page(args);
}

}  // namespace

TEST_CASE("A planted repeat of the page kernels leaves the output bit-identical and runs the share of items again",
          "[attention]") {
  const PageKernels counting{Isa::Scalar, counting_decode, counting_prefill, page_kernels(Isa::Scalar).page_bounds};
  const RandomPages kv = random_pages(Format::Q4, 4, 64, 16, 16 * 40 + 3, 21);  // 41 pages a head
  const AttentionShape shape{16, 4, 64, 0.125f};
  for (int n_queries : {1, 70}) {
    for (double share : {0.05, 0.25, 1.0}) {
      CAPTURE(n_queries, share);
      const auto q = kvtest::random_values(static_cast<std::size_t>(n_queries) * 16 * 64, 3);
      std::vector<int> calls;
      std::vector<std::vector<float>> outs;
      for (double repeat : {0.0, share}) {
        ThreadPool pool(2);
        AttentionWorkspace workspace;
        std::vector<float> out(q.size());
        PagedAttentionArgs args;
        args.shape = shape;
        args.pages = &kv.views;
        args.q = q.data();
        args.n_queries = n_queries;
        args.out = out.data();
        args.repeat_share = repeat;
        g_decode_calls = 0;
        g_prefill_calls = 0;
        paged_attention(counting, pool, args, workspace);
        calls.push_back(n_queries == 1 ? g_decode_calls.load() : g_prefill_calls.load());
        outs.push_back(out);
      }
      REQUIRE(std::memcmp(outs[0].data(), outs[1].data(), outs[0].size() * sizeof(float)) == 0);
      // Items: (kv head, page) for decode, one contiguous run of indices: exactly
      // floor(items * share) repeats. Prefill's are (kv head and query block, page), a run per
      // task (8 here) that its causal end may cut short: within one repeat a task.
      const double items = calls[0];
      const double extra = calls[1] - calls[0];
      const double slack = n_queries == 1 ? 0.0 : 8.0;
      CHECK(extra >= std::floor(items * share) - slack);
      CHECK(extra <= std::floor(items * share) + slack);
    }
  }
}
