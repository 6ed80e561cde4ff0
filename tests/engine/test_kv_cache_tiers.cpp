// The KV cache over the memory tiers: offload changes where bytes live, never their values.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <chrono>
#include <thread>
#include <vector>

#include "attention/attention_ref.h"
#include "kv_cache.h"
#include "runtime/error.h"
#include "sparse/sparse_decoder.h"
#include "test_support.h"

using namespace kv;
namespace fs = std::filesystem;

using kvtest::bit_identical;

namespace {

// Slow reads: the migrator lags behind the decode path, as on a loaded machine or a slow card.
class SlowReads final : public FileIo {
 public:
  int open(const std::string& path, int flags, int mode) override { return real_.open(path, flags, mode); }
  ssize_t pwrite(int fd, const void* data, std::size_t bytes, off_t offset) override { return real_.pwrite(fd, data, bytes, offset); }
  ssize_t pread(int fd, void* data, std::size_t bytes, off_t offset) override {
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    return real_.pread(fd, data, bytes, offset);
  }
  int fdatasync(int fd) override { return real_.fdatasync(fd); }
  int drop_cache(int fd, off_t offset, off_t bytes) override { return real_.drop_cache(fd, offset, bytes); }
  int close(int fd) override { return real_.close(fd); }
  int unlink(const std::string& path) override { return real_.unlink(path); }

 private:
  FileIo& real_ = posix_file_io();
};

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

// L1 holds about 40% of the prompt's sealed pages (plus the page summaries and the residual,
// which L1 also holds); the rest lives in L2.
CacheConfig tiered_config(Format f, const std::string& dir, int lookahead = 2, double share = 0.4) {
  CacheConfig c = base_config(f);
  const std::size_t pages = static_cast<std::size_t>((kPrompt + kSteps) / kPageTokens + 1) * kKvHeads * kLayers;
  const std::size_t summaries = pages * 4 * kDim * 2, residual = 2 * kKvHeads * kLayers * (2 * kPageTokens * kDim * 4 + 1024);
  c.memory.l1_bytes = static_cast<std::size_t>(static_cast<double>(sealed_bytes_of(f)) * share) + summaries + residual;
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

// The memory events a cache reports, nothing else.
struct MemoryEventLog : Telemetry {
  void on_page_sealed(const PageSealed&) override {}
  void on_nan_inf(int, std::uint64_t) override {}
  void on_kernel(KernelKind, Isa) override {}
  void on_ops(Phase, const OpCounts&) override {}
  void on_memory_event(const MemoryEvent& e) override { events.push_back(e); }
  std::vector<MemoryEvent> of(MemoryEvent::Kind kind) const {
    std::vector<MemoryEvent> out;
    for (const MemoryEvent& e : events) {
      if (e.kind == kind) out.push_back(e);
    }
    return out;
  }
  std::vector<MemoryEvent> events;
};

// A plan whose every kv head keeps `kept` (ascending) of `pages`, scored 10 against 0.
SelectionPlan plan_keeping(const std::vector<int>& kept, int pages) {
  SelectionPlan plan;
  plan.total_pages = pages;
  plan.budget_pages = static_cast<int>(kept.size());
  plan.heads.resize(kKvHeads);
  for (HeadSelection& head : plan.heads) {
    for (int p = 0; p < pages; ++p) {
      const bool in = std::binary_search(kept.begin(), kept.end(), p);
      if (in) {
        head.pages.push_back(p);
        head.reasons.push_back(KeepReason::Score);
      }
      head.middle_scores.push_back(in ? 10.0f : 0.0f);
    }
  }
  return plan;
}

}  // namespace

TEST_CASE("decode over L1 + L2 is bit-identical to all-in-L1, every format", "[memory][kv_cache]") {
  const Format format = GENERATE(Format::F32, Format::F16, Format::FP8, Format::Q8, Format::Q4, Format::Q2);
  const bool sparse = GENERATE(false, true);
  CAPTURE(format_name(format), sparse);
  kvtest::TempDir dir("cache-tiers");
  const SparsePolicy policy = hybrid(0.25f);
  const Run resident = run(base_config(format), sparse ? &policy : nullptr);
  const bool slow = GENERATE(false, true);
  CAPTURE(slow);
  SlowReads slow_io;
  CacheConfig config = tiered_config(format, dir.path);
  if (slow) config.memory.l2.io = &slow_io;
  const Run offloaded = run(config, sparse ? &policy : nullptr);
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

// A selection that scans forward one page per step (a reader moving through a document), its
// scores ranking the pages just ahead highest: what a prefetcher should catch.
std::vector<float> scan(const CacheConfig& config, int steps, MemoryStats& stats) {
  KVCache cache(config);
  const SeqId seq = cache.create_sequence();
  const auto k = kvtest::random_keys(kPrompt, kKvHeads, kDim, 5);
  const auto v = kvtest::random_values(static_cast<std::size_t>(kPrompt) * kKvHeads * kDim, 6);
  cache.append(seq, 0, k.data(), v.data(), kPrompt);
  const int pages = (kPrompt + kPageTokens - 1) / kPageTokens;
  std::vector<float> outputs, out(static_cast<std::size_t>(kQHeads) * kDim);
  const auto q = kvtest::random_values(out.size(), 9);
  for (int step = 0; step < steps; ++step) {
    SelectionPlan plan;
    plan.total_pages = pages;
    plan.budget_pages = 4;
    plan.heads.resize(kKvHeads);
    for (HeadSelection& head : plan.heads) {
      for (int p = 0; p < pages; ++p) {
        if (p >= 1 + step && p < 5 + step) {
          head.pages.push_back(p);
          head.reasons.push_back(KeepReason::Score);
        }
        head.middle_scores.push_back(p >= 1 + step ? 100.0f - static_cast<float>(p - step) : -1.0f);
      }
    }
    AttendOptions options;
    options.plan = &plan;
    cache.attend(seq, 0, q.data(), 1, out.data(), options);
    outputs.insert(outputs.end(), out.begin(), out.end());
  }
  stats = cache.stats().memory;
  return outputs;
}

TEST_CASE("prefetch changes no output and leaves the decode path fewer pages to load", "[memory][kv_cache]") {
  kvtest::TempDir dir("cache-prefetch");
  MemoryStats off, on;
  const auto without = scan(tiered_config(Format::Q4, dir.path, 0, 0.2), 30, off);
  const auto with = scan(tiered_config(Format::Q4, dir.path, 2, 0.2), 30, on);
  REQUIRE(bit_identical(without, with));
  CHECK(off.prefetch_loads == 0);
  CHECK(off.demand_loads > 30);  // the scanned pages start in L2
  CHECK(on.prefetch_hits > 0);
  CHECK(on.demand_loads < off.demand_loads / 2);
  CHECK(on.prefetch_hit_rate() > 0.5);
  // And a sparse decode through the selector matches with prefetch on or off.
  const SparsePolicy policy = hybrid(0.2f);
  REQUIRE(bit_identical(run(tiered_config(Format::Q4, dir.path, 0), &policy).outputs,
                        run(tiered_config(Format::Q4, dir.path, 2), &policy).outputs));
}

TEST_CASE("the prompt's last query predicts the first decode step: it loads only what the prediction missed", "[memory][kv_cache]") {
  kvtest::TempDir dir("cache-first-step");
  const SparsePolicy policy = hybrid(0.1f);
  const auto first_step = [&](bool predict) {
    KVCache cache(tiered_config(Format::Q4, dir.path, 2, 0.3));
    SparseDecoder decoder(cache, policy);
    const SeqId seq = cache.create_sequence();
    const std::size_t row = static_cast<std::size_t>(kKvHeads) * kDim;
    const auto k = kvtest::random_keys(kPrompt + 1, kKvHeads, kDim, 5);
    const auto v = kvtest::random_values(static_cast<std::size_t>(kPrompt + 1) * row, 6);
    const auto q = kvtest::random_values(static_cast<std::size_t>(kQHeads) * kDim, 7);
    cache.set_phase(Phase::Prefill);
    for (int l = 0; l < kLayers; ++l) {
      cache.append(seq, l, k.data(), v.data(), kPrompt);
      if (predict) decoder.predict_next(seq, l, q.data());  // the prompt's last query is q
    }
    // The first decode step asks what the last prompt query asked (a question, then its answer).
    cache.set_phase(Phase::Decode);
    std::vector<float> out(static_cast<std::size_t>(kQHeads) * kDim);
    std::vector<std::vector<int>> planned;
    for (int l = 0; l < kLayers; ++l) {
      decoder.attend(seq, l, q.data(), out.data());
      for (const HeadSelection& head : decoder.last_plan().heads) planned.push_back(head.pages);
    }
    decoder.end_step();
    return std::make_pair(cache.stats().memory, planned);
  };
  const auto [cold, cold_plan] = first_step(false);
  const auto [warm, warm_plan] = first_step(true);
  CHECK(cold_plan == warm_plan);  // prediction changes where pages are, not what is selected
  REQUIRE(cold.first_step_pages > 0);
  CHECK(warm.first_step_pages == cold.first_step_pages);
  CHECK(cold.first_step_demand_loads > cold.first_step_pages / 4);  // without it most selected pages are in L2
  CHECK(warm.first_step_demand_loads == 0);                         // the same query: nothing missed
  CHECK(warm.prefetch_loads > 0);
  CHECK(warm.decode_steps == kLayers);
}

TEST_CASE("a question switch is reported once, at the switch, with the loads it caused", "[memory][kv_cache]") {
  MemoryEventLog events;
  kvtest::TempDir dir("cache-shift");
  KVCache cache(tiered_config(Format::Q4, dir.path, 2, 0.2), &events);
  const SeqId seq = cache.create_sequence();
  const auto k = kvtest::random_keys(kPrompt, kKvHeads, kDim, 5);
  const auto v = kvtest::random_values(static_cast<std::size_t>(kPrompt) * kKvHeads * kDim, 6);
  cache.append(seq, 0, k.data(), v.data(), kPrompt);
  const int pages = (kPrompt + kPageTokens - 1) / kPageTokens;
  std::vector<float> out(static_cast<std::size_t>(kQHeads) * kDim);
  const auto q = kvtest::random_values(out.size(), 8);
  // Eight pages asked about, then (step 6) eight others, far away: one page in four drifting
  // (step 3) stays under the 30% threshold.
  const auto kept_at = [](int step) {
    const int first = step < 6 ? 10 : 30;
    std::vector<int> kept;
    for (int p = first; p < first + 8; ++p) kept.push_back(step >= 3 && step < 6 && p == first ? 50 : p);
    std::sort(kept.begin(), kept.end());
    return kept;
  };
  std::uint64_t loads_at_switch = 0;
  for (int step = 0; step < 10; ++step) {
    cache.set_phase(Phase::Decode);
    const SelectionPlan plan = plan_keeping(kept_at(step), pages);
    AttendOptions options;
    options.plan = &plan;
    const std::uint64_t before = cache.stats().memory.demand_loads;
    cache.attend(seq, 0, q.data(), 1, out.data(), options);
    if (step == 6) loads_at_switch = cache.stats().memory.demand_loads - before;
    cache.end_decode_step();
  }
  const std::vector<MemoryEvent> shifts = events.of(MemoryEvent::Kind::SelectionShift);
  REQUIRE(shifts.size() == 1);
  CHECK(loads_at_switch > 0);  // the new pages were in L2: nothing predicted them
  CHECK(shifts[0].pages == loads_at_switch);
  CHECK(shifts[0].shift.layer == 0);
  CHECK(shifts[0].shift.new_pages == 16);
  CHECK(shifts[0].shift.kept_pages == 16);
  CHECK_THAT(shifts[0].reason, Catch::Contains("layer 0: 16 of 16 kept pages new"));
  CHECK_THAT(shifts[0].reason, Catch::Contains(std::to_string(loads_at_switch) + " loaded on demand"));
}

TEST_CASE("a question switch one layer sees is prefetched for the next layer while they agree", "[memory][kv_cache]") {
  // Both layers keep six pages, drift by one (step 2), then (step 4) switch to six others far
  // away: a switch the next layer's own history cannot predict. When layer 1 drifted with layer
  // 0, it is predicted to follow the switch too; when it drifted elsewhere, it is not. L1 holds
  // 60% of the sealed pages: room for the switch's pages beside the ones predicted anyway.
  const auto run_switch = [](bool agree) {
    kvtest::TempDir dir("cache-next-layer");
    KVCache cache(tiered_config(Format::Q4, dir.path, 2, 0.6));
    const SeqId seq = cache.create_sequence();
    const std::size_t row = static_cast<std::size_t>(kKvHeads) * kDim;
    const auto k = kvtest::random_keys(kPrompt, kKvHeads, kDim, 5);
    const auto v = kvtest::random_values(static_cast<std::size_t>(kPrompt) * row, 6);
    // Chunk by chunk through both layers, as a prefill goes: the old pages of both are in L2.
    for (int at = 0; at < kPrompt; at += 100) {
      for (int l = 0; l < kLayers; ++l) cache.append(seq, l, k.data() + at * row, v.data() + at * row, std::min(100, kPrompt - at));
    }
    const int pages = (kPrompt + kPageTokens - 1) / kPageTokens;
    const auto plan_at = [&](int step, int layer) {
      std::vector<int> kept;
      for (int p = 0; p < 6; ++p) kept.push_back((step < 4 ? 10 : 30) + p);
      if (step >= 2 && step < 4) kept[0] = layer == 0 || agree ? 50 : 70;
      std::sort(kept.begin(), kept.end());
      return plan_keeping(kept, pages);
    };
    std::vector<float> out(static_cast<std::size_t>(kQHeads) * kDim);
    const auto q = kvtest::random_values(out.size(), 8);
    std::array<std::uint64_t, kLayers> loads{}, hits{};  // at the switch
    for (int step = 0; step < 6; ++step) {
      cache.set_phase(Phase::Decode);
      for (int l = 0; l < kLayers; ++l) {
        const SelectionPlan plan = plan_at(step, l);
        AttendOptions options;
        options.plan = &plan;
        const MemoryStats before = cache.stats().memory;
        cache.attend(seq, l, q.data(), 1, out.data(), options);
        if (step == 4) {
          loads[static_cast<std::size_t>(l)] = cache.stats().memory.demand_loads - before.demand_loads;
          hits[static_cast<std::size_t>(l)] = cache.stats().memory.prefetch_hits - before.prefetch_hits;
        }
      }
      cache.end_decode_step();
    }
    return std::make_pair(loads, hits);
  };
  const auto [loads, hits] = run_switch(true);
  INFO("layer 0 loads " << loads[0] << ", layer 1 loads " << loads[1] << " and prefetch hits " << hits[1]);
  CHECK(loads[0] > 0);  // layer 0 met the switch with its new pages in L2
  CHECK(hits[0] == 0);
  CHECK(loads[1] == 0);  // layer 1's were prefetched while layer 0 finished its step
  CHECK(hits[1] > 0);
  const auto [apart_loads, apart_hits] = run_switch(false);
  CHECK(apart_loads[1] > 0);  // no agreement learned: nothing prefetched for the switch
  CHECK(apart_hits[1] == 0);
}

TEST_CASE("l0_copy: kernels read real copies in L0-sized batches and agree with the direct path", "[memory][kv_cache]") {
  const Format format = GENERATE(Format::F16, Format::Q4);
  const bool sparse = GENERATE(false, true);
  CAPTURE(format_name(format), sparse);
  kvtest::TempDir dir("cache-l0");
  const SparsePolicy policy = hybrid(0.25f);
  const Run direct = run(base_config(format), sparse ? &policy : nullptr);
  CacheConfig config = tiered_config(format, dir.path);
  config.memory.l0_copy = true;
  config.memory.l0_bytes = 64u << 10;  // a few pages per head per batch
  const Run staged = run(config, sparse ? &policy : nullptr);
  CHECK(kvtest::relative_error(staged.outputs, direct.outputs) < 1e-5f);
  const MemoryStats& m = staged.stats.memory;
  CHECK(m.l0_batches > static_cast<std::uint64_t>(kSteps * kLayers));  // several batches per step
  CHECK(m.peak_l0_bytes == config.memory.l0_bytes);
  // Too small to hold one page of every head in a half: refused, naming the field.
  config.memory.l0_bytes = 8u << 10;
  CHECK_THROWS_WITH(run(config, nullptr), Catch::Contains("l0_bytes"));
}

TEST_CASE("danger without room to demote: the long tail is requantized to INT2, nothing fails", "[memory][kv_cache]") {
  MemoryEventLog events;
  // No L2 tier and an L1 cap below the context: only requantization can make room.
  CacheConfig config = base_config(Format::Q8);
  config.memory.l1_bytes = sealed_bytes_of(Format::Q8) * 8 / 10;
  config.memory.pin_window_tokens = 64;
  KVCache cache(config, &events);
  const SeqId seq = cache.create_sequence();
  const auto k = kvtest::random_keys(kPrompt, kKvHeads, kDim, 5);
  const auto v = kvtest::random_values(static_cast<std::size_t>(kPrompt) * kKvHeads * kDim, 6);
  for (int l = 0; l < kLayers; ++l) cache.append(seq, l, k.data(), v.data(), kPrompt);
  const MemoryStats m = cache.stats().memory;
  CHECK(m.requantized_pages > 0);
  CHECK_FALSE(events.of(MemoryEvent::Kind::Requantized).empty());
  CHECK(m.l1_used_bytes <= config.memory.l1_bytes);
  // The requantized pages are attended as INT2 pages: the kernel agrees with the exact
  // reference over the values the cache now stores, which differ from the q8 ones.
  const auto views = cache.page_views(seq, 0);
  int small = 0;
  for (const PageView& page : views[0]) small += page.layout->k_format == Format::Q2 ? 1 : 0;
  CHECK(small > 0);
  const ModelGeometry& g = config.geometry;
  const AttentionShape shape{g.q_heads, g.kv_heads, g.head_dim, cache.config().softmax_scale};
  const DenseKV dense = gather_pages_ref(shape, views);
  const auto q = kvtest::random_values(static_cast<std::size_t>(kQHeads) * kDim, 9);
  std::vector<float> out(q.size()), expected(q.size());
  cache.attend(seq, 0, q.data(), 1, out.data());
  attention_ref(shape, q.data(), 1, dense.k.data(), dense.v.data(), dense.ctx, expected.data());
  CHECK(kvtest::relative_error(out, expected) < 1e-4f);
  KVCache resident(base_config(Format::Q8));
  const SeqId other = resident.create_sequence();
  resident.append(other, 0, k.data(), v.data(), kPrompt);
  std::vector<float> q8(q.size());
  resident.attend(other, 0, q.data(), 1, q8.data());
  CHECK(kvtest::relative_error(out, q8) > 1e-3f);
}

TEST_CASE("the operation counts carry every L2 byte the attention calls loaded", "[memory][kv_cache]") {
  struct L2Reads : Telemetry {
    void on_page_sealed(const PageSealed&) override {}
    void on_nan_inf(int, std::uint64_t) override {}
    void on_kernel(KernelKind, Isa) override {}
    void on_ops(Phase, const OpCounts& ops) override {
      for (std::uint64_t bytes : ops.bytes_read[static_cast<int>(Tier::L2)]) read += bytes;
    }
    std::uint64_t read = 0;
  } sink;
  kvtest::TempDir dir("cache-l2-ops");
  KVCache cache(tiered_config(Format::Q4, dir.path), &sink);
  const SeqId seq = cache.create_sequence();
  const auto k = kvtest::random_keys(kPrompt, kKvHeads, kDim, 5);
  const auto v = kvtest::random_values(static_cast<std::size_t>(kPrompt) * kKvHeads * kDim, 6);
  for (int l = 0; l < kLayers; ++l) cache.append(seq, l, k.data(), v.data(), kPrompt);
  const auto q = kvtest::random_values(static_cast<std::size_t>(kQHeads) * kDim, 9);
  std::vector<float> out(q.size());
  for (int step = 0; step < 3; ++step) {
    for (int l = 0; l < kLayers; ++l) cache.attend(seq, l, q.data(), 1, out.data());
  }
  const MemoryStats m = cache.stats().memory;
  REQUIRE(m.demand_loads > 0);
  CHECK(sink.read == m.swap_in_bytes);  // demand loads and prefetches alike
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

TEST_CASE("a serial cache - one thread, L2 I/O and L0 copies on it - decodes bit-identically and moves the same bytes", "[memory][kv_cache][sim]") {
  const bool staged = GENERATE(false, true);
  CAPTURE(staged);
  kvtest::TempDir dir("cache-serial");
  const SparsePolicy policy = hybrid(0.2f);
  CacheConfig threaded = tiered_config(Format::Q4, dir.path);
  if (staged) {
    threaded.memory.l0_copy = true;
    threaded.memory.l0_bytes = 64u << 10;
  }
  const CacheConfig serial = serial_config(threaded);
  CHECK(serial.threads == 1);
  CHECK(serial.memory.l2.synchronous);
  const Run a = run(threaded, &policy);
  const Run b = run(serial, &policy);
  REQUIRE(bit_identical(a.outputs, b.outputs));
  CHECK(b.stats.memory.swap_out_bytes == a.stats.memory.swap_out_bytes);
  CHECK(b.stats.memory.swap_in_bytes == a.stats.memory.swap_in_bytes);
  CHECK(b.stats.memory.demand_loads == a.stats.memory.demand_loads);
  CHECK(b.stats.memory.prefetch_hits == a.stats.memory.prefetch_hits);
  CHECK(b.stats.memory.dma_wait_ns == 0);  // every load ran when it was queued
  // Half of serial is refused: it is all three or an error.
  CacheConfig half = serial;
  half.memory.l2.synchronous = false;
  CHECK_THROWS_WITH(KVCache(half), Catch::Contains("serial"));
}

TEST_CASE("a corrupted L2 segment fails the attention call with the segment named", "[memory][kv_cache]") {
  kvtest::TempDir dir("cache-corrupt");
  KVCache cache(tiered_config(Format::Q4, dir.path, 2, 0.1));
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
