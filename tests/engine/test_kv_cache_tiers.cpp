// The KV cache over the memory tiers: offload changes where bytes live, never their values.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "kv_cache.h"
#include "runtime/error.h"
#include "sparse/sparse_decoder.h"
#include "test_support.h"

using namespace kv;
namespace fs = std::filesystem;

namespace {

constexpr int kLayers = 2, kQHeads = 8, kKvHeads = 2, kDim = 64, kPageTokens = 16;
constexpr int kPrompt = 1500, kSteps = 24;

CacheConfig base_config(Format f) {
  CacheConfig c;
  c.geometry = {kLayers, kQHeads, kKvHeads, kDim, 4096};
  c.k_format = f;
  c.v_format = f;
  c.page_tokens = kPageTokens;
  c.threads = 2;
  return c;
}

std::size_t sealed_bytes_of(Format f) {
  const PageLayout layout = PageLayout::make({kPageTokens, kDim, f, f, 32, false});
  return static_cast<std::size_t>(kPrompt / kPageTokens) * kKvHeads * kLayers * layout.bytes;
}

// L1 holds about 40% of the prompt's sealed pages; the rest lives in L2.
CacheConfig tiered_config(Format f, const std::string& dir, int lookahead = 2) {
  CacheConfig c = base_config(f);
  c.memory.l1_bytes = sealed_bytes_of(f) * 2 / 5;
  c.memory.l2.dir = dir;
  c.memory.l2.segment_bytes = 4u << 20;
  c.memory.l2.batch_bytes = 256u << 10;
  c.memory.pin_window_tokens = 64;
  c.memory.prefetch_lookahead = lookahead;
  return c;
}

struct Run {
  std::vector<float> outputs;  // every step's attention output, layer after layer
  CacheStats stats;
};

// Prefill, then kSteps decode steps on both layers (full attention, or a sparse decoder).
Run run(const CacheConfig& config, const SparsePolicy* policy) {
  KVCache cache(config);
  const SeqId seq = cache.create_sequence();
  const std::size_t row = static_cast<std::size_t>(kKvHeads) * kDim;
  const auto k = kvtest::random_keys(kPrompt + kSteps, kKvHeads, kDim, 5);
  const auto v = kvtest::random_values(static_cast<std::size_t>(kPrompt + kSteps) * row, 6);
  for (int l = 0; l < kLayers; ++l) cache.append(seq, l, k.data(), v.data(), kPrompt);
  std::unique_ptr<SparseDecoder> decoder;
  if (policy != nullptr) decoder = std::make_unique<SparseDecoder>(cache, *policy);
  Run result;
  std::vector<float> out(static_cast<std::size_t>(kQHeads) * kDim);
  // Queries drift step by step (a random walk), as a decoder's do.
  auto q = kvtest::random_values(out.size(), 99);
  for (int step = 0; step < kSteps; ++step) {
    const auto drift = kvtest::random_values(out.size(), 100 + static_cast<std::uint32_t>(step), 0.25f);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] += drift[i];
    for (int l = 0; l < kLayers; ++l) {
      const std::size_t at = static_cast<std::size_t>(kPrompt + step) * row;
      cache.append(seq, l, k.data() + at, v.data() + at, 1);
      if (decoder) {
        decoder->attend(seq, l, q.data(), out.data());
      } else {
        cache.attend(seq, l, q.data(), 1, out.data());
      }
      result.outputs.insert(result.outputs.end(), out.begin(), out.end());
    }
    if (decoder) decoder->end_step();
  }
  result.stats = cache.stats();
  return result;
}

SparsePolicy hybrid(float budget) {
  SparsePolicy p;
  p.selector = Selector::Hybrid;
  p.budget = budget;
  p.sinks = 4;
  p.window = 64;
  return p;
}

bool bit_identical(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("decode over L1 + L2 is bit-identical to all-in-L1, every format", "[memory][kv_cache]") {
  const Format format = GENERATE(Format::F32, Format::F16, Format::FP8, Format::Q8, Format::Q4, Format::Q2);
  const bool sparse = GENERATE(false, true);
  CAPTURE(format_name(format), sparse);
  kvtest::TempDir dir("cache-tiers");
  const SparsePolicy policy = hybrid(0.25f);
  const Run resident = run(base_config(format), sparse ? &policy : nullptr);
  const Run offloaded = run(tiered_config(format, dir.path), sparse ? &policy : nullptr);
  REQUIRE(bit_identical(resident.outputs, offloaded.outputs));
  const MemoryStats& m = offloaded.stats.memory;
  CHECK(resident.stats.memory.swap_out_bytes == 0);
  CHECK(m.swap_out_bytes > 0);
  CHECK(m.swap_in_bytes > 0);
  // A sparse step's pages fit in L1; a full step reads half the context at once and may not.
  if (sparse) CHECK(m.peak_l1_bytes <= m.l1_capacity_bytes);
  CHECK(m.l2_enabled);
  CHECK_FALSE(m.l2_mode.empty());
}

TEST_CASE("prefetch changes no output and leaves the decode path fewer pages to load", "[memory][kv_cache]") {
  kvtest::TempDir dir("cache-prefetch");
  // Full attention streams every page each step: what prefetch brings in the step's shadow,
  // the next step does not load itself. A sparse decode must match too.
  const SparsePolicy policy = hybrid(0.2f);
  const bool sparse = GENERATE(false, true);
  CAPTURE(sparse);
  const Run off = run(tiered_config(Format::Q4, dir.path, 0), sparse ? &policy : nullptr);
  const Run on = run(tiered_config(Format::Q4, dir.path, 2), sparse ? &policy : nullptr);
  REQUIRE(bit_identical(off.outputs, on.outputs));
  CHECK(off.stats.memory.prefetch_loads == 0);
  CHECK(on.stats.memory.demand_loads <= off.stats.memory.demand_loads);
  if (!sparse) {
    CHECK(on.stats.memory.prefetch_hits > 0);
    CHECK(on.stats.memory.demand_loads < off.stats.memory.demand_loads);
  }
}

TEST_CASE("placement is deterministic: the same run moves the same bytes", "[memory][kv_cache]") {
  kvtest::TempDir dir("cache-determinism");
  const SparsePolicy policy = hybrid(0.2f);
  const Run a = run(tiered_config(Format::Q8, dir.path), &policy);
  const Run b = run(tiered_config(Format::Q8, dir.path), &policy);
  CHECK(a.stats.memory.swap_in_bytes == b.stats.memory.swap_in_bytes);
  CHECK(a.stats.memory.swap_out_bytes == b.stats.memory.swap_out_bytes);
  CHECK(a.stats.memory.demand_loads == b.stats.memory.demand_loads);
  CHECK(a.stats.memory.prefetch_hits == b.stats.memory.prefetch_hits);
  CHECK(a.stats.memory.cold_hits == b.stats.memory.cold_hits);
}

TEST_CASE("a corrupted L2 segment fails the attention call with the segment named", "[memory][kv_cache]") {
  kvtest::TempDir dir("cache-corrupt");
  KVCache cache(tiered_config(Format::Q4, dir.path));
  const SeqId seq = cache.create_sequence();
  const auto k = kvtest::random_keys(kPrompt, kKvHeads, kDim, 5);
  const auto v = kvtest::random_values(static_cast<std::size_t>(kPrompt) * kKvHeads * kDim, 6);
  cache.append(seq, 0, k.data(), v.data(), kPrompt);
  cache.drain_memory();
  int corrupted = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir.path)) {
    if (e.path().extension() != ".kvl2") continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    for (std::uintmax_t at = 100; at < fs::file_size(e.path()); at += 512) {
      f.seekp(static_cast<std::streamoff>(at));
      f.put('\x7f');
      ++corrupted;
    }
  }
  REQUIRE(corrupted > 0);
  const auto q = kvtest::random_values(static_cast<std::size_t>(kQHeads) * kDim, 9);
  std::vector<float> out(q.size());
  CHECK_THROWS_WITH(cache.attend(seq, 0, q.data(), 1, out.data()),
                    Catch::Contains("checksum mismatch") && Catch::Contains(".kvl2"));
}

TEST_CASE("a missing L2 directory is an error when the cache opens", "[memory][kv_cache]") {
  CHECK_THROWS_WITH(KVCache(tiered_config(Format::Q4, "/nonexistent/kvbench-l2")),
                    Catch::Contains("/nonexistent/kvbench-l2") && Catch::Contains("does not exist"));
}
