#include "host_calibration.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <thread>
#include <vector>

#include "attention/paged_attention.h"
#include "build_info.h"
#include "kv_cache.h"
#include "machine.h"
#include "memory/l2_store.h"
#include "runtime/error.h"
#include "runtime/isa.h"
#include "model/dense.h"
#include "runtime/thread_pool.h"
#include "sparse/quest.h"
#include "soc/cost_model.h"
#include "sparse/selection.h"
#include "sparse/sparse_decoder.h"

namespace kvbench {

namespace {

using Clock = std::chrono::steady_clock;
using kv::soc::Quantity;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Seconds per call of fn: the median of three batches, each repeating fn for at least
// min_seconds (after one untimed call).
template <typename Fn>
double seconds_per_call(Fn&& fn, double min_seconds) {
  fn();
  std::vector<double> batches;
  for (int b = 0; b < 3; ++b) {
    std::uint64_t calls = 0;
    const auto start = Clock::now();
    double elapsed = 0.0;
    do {
      fn();
      ++calls;
      elapsed = seconds_since(start);
    } while (elapsed < min_seconds);
    batches.push_back(elapsed / static_cast<double>(calls));
  }
  std::sort(batches.begin(), batches.end());
  return batches[1];
}

// The decode shape the suites' 7B-class presets run: 32 q heads, 8 kv heads, head_dim 128,
// pages of 64 tokens, one layer.
constexpr int kQHeads = 32, kKvHeads = 8, kHeadDim = 128, kPageTokens = 64;

std::vector<float> values(std::size_t count, unsigned seed, bool keys) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    out[i] = normal(rng);
    if (keys && i % 16 == 3) out[i] += 8.0f;
  }
  return out;
}

kv::CacheConfig shape(kv::Format format, int ctx, int threads) {
  kv::CacheConfig c;
  c.geometry = {1, kQHeads, kKvHeads, kHeadDim, ctx};
  c.k_format = c.v_format = format;
  c.page_tokens = kPageTokens;
  c.residual_tokens = 0;
  c.threads = threads;
  return c;
}

// Copies of one context in one cache, cycled by the timed calls.
struct Contexts {
  std::unique_ptr<kv::KVCache> cache;
  std::vector<kv::SeqId> copies;
  std::size_t next = 0;
  kv::SeqId take() {
    const kv::SeqId seq = copies[next];
    next = (next + 1) % copies.size();
    return seq;
  }
};

Contexts make_contexts(kv::Format format, int ctx, int threads, kv::Telemetry* telemetry = nullptr,
                       const kv::MemoryConfig* memory = nullptr) {
  Contexts c;
  kv::CacheConfig config = shape(format, ctx, threads);
  if (memory != nullptr) config.memory = *memory;
  c.cache = std::make_unique<kv::KVCache>(config, telemetry);
  constexpr std::size_t copies = 2;  // taking turns, as two sampled layers do in a run
  const std::size_t count = static_cast<std::size_t>(ctx) * kKvHeads * kHeadDim;
  const auto k = values(count, 11, true);
  const auto v = values(count, 12, false);
  for (std::size_t i = 0; i < copies; ++i) {
    c.copies.push_back(c.cache->create_sequence());
    c.cache->append(c.copies.back(), 0, k.data(), v.data(), ctx);
  }
  return c;
}

// A directory of the calibration's own inside the L2 directory, removed with its files.
class ScopedDir {
 public:
  ScopedDir(const std::string& base, const std::string& stem)
      : path_(std::filesystem::path(base) / fmt::format("{}-{}", stem, ::getpid())) {
    std::error_code ec;
    std::filesystem::create_directory(path_, ec);
    if (ec) throw kv::InputError(base, "--l2-dir", "cannot create a calibration directory: " + ec.message());
  }
  ~ScopedDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  ScopedDir(const ScopedDir&) = delete;
  ScopedDir& operator=(const ScopedDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// Sums the operation counts the engine reports (the cost model's view of a call).
class OpsSum final : public kv::Telemetry {
 public:
  kv::OpCounts ops;
  std::uint64_t calls = 0;
  void on_page_sealed(const kv::PageSealed&) override {}
  void on_nan_inf(int, std::uint64_t) override {}
  void on_kernel(kv::KernelKind, kv::Isa) override {}
  void on_ops(kv::Phase, const kv::OpCounts& counts) override {
    ops += counts;
    calls += counts.attention_calls;
  }
  void reset() {
    ops = {};
    calls = 0;
  }
};

Quantity measured(double value, const std::string& unit, const std::string& how) {
  return Quantity{value, unit, "", "measured by kvbench calibrate: " + how};
}

// Streams over a buffer larger than any cache: read (sum), write (fill) and copy, on
// `threads` threads, in decimal GB/s of bytes touched.
struct Stream {
  double read = 0.0, write = 0.0, copy = 0.0;
};
Stream stream_bandwidth(int threads, double min_seconds, std::size_t kBytes) {
  const std::size_t n = kBytes / sizeof(double);
  std::vector<double> a(n, 1.0), b(n, 2.0);
  kv::ThreadPool pool(threads);
  const auto parts = static_cast<std::size_t>(pool.size());
  const std::size_t chunk = (n + parts - 1) / parts;
  std::vector<double> sums(parts);
  Stream s;
  const double read = seconds_per_call(
      [&] {
        pool.parallel_for(parts, [&](std::size_t p) {
          double acc0 = 0.0, acc1 = 0.0, acc2 = 0.0, acc3 = 0.0;
          const std::size_t end = std::min(n, (p + 1) * chunk);
          std::size_t i = p * chunk;
          for (; i + 4 <= end; i += 4) {
            acc0 += a[i];
            acc1 += a[i + 1];
            acc2 += a[i + 2];
            acc3 += a[i + 3];
          }
          for (; i < end; ++i) acc0 += a[i];
          sums[p] = acc0 + acc1 + acc2 + acc3;
        });
      },
      min_seconds);
  s.read = static_cast<double>(kBytes) / read * 1e-9;
  double fill = 3.0;
  const double write = seconds_per_call(
      [&] {
        fill += 1.0;
        pool.parallel_for(parts, [&](std::size_t p) {
          const std::size_t begin = p * chunk, end = std::min(n, (p + 1) * chunk);
          if (begin < end) std::fill(b.begin() + static_cast<std::ptrdiff_t>(begin), b.begin() + static_cast<std::ptrdiff_t>(end), fill);
        });
      },
      min_seconds);
  s.write = static_cast<double>(kBytes) / write * 1e-9;
  const double copy = seconds_per_call(
      [&] {
        pool.parallel_for(parts, [&](std::size_t p) {
          const std::size_t begin = p * chunk, end = std::min(n, (p + 1) * chunk);
          if (begin < end) std::memcpy(b.data() + begin, a.data() + begin, (end - begin) * sizeof(double));
        });
      },
      min_seconds);
  s.copy = 2.0 * static_cast<double>(kBytes) / copy * 1e-9;  // read and written
  volatile double keep = std::accumulate(sums.begin(), sums.end(), 0.0) + b[n / 2];
  (void)keep;
  return s;
}

// Dependent loads over a random cycle of cache lines: the latency of one access.
double chase_latency_us(std::size_t bytes, std::size_t kHops) {
  const std::size_t lines = bytes / 64;
  std::vector<std::size_t> order(lines);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(5));
  std::vector<std::size_t> next(lines * 8);
  for (std::size_t i = 0; i < lines; ++i) next[order[i] * 8] = order[(i + 1) % lines] * 8;
  std::size_t at = order[0] * 8;
  const auto start = Clock::now();
  for (std::size_t h = 0; h < kHops; ++h) at = next[at];
  const double seconds = seconds_since(start);
  volatile std::size_t keep = at;
  (void)keep;
  return seconds / kHops * 1e6;
}

// One linear fit through two (x, seconds) points: (intercept seconds, seconds per x).
std::pair<double, double> line(double x1, double t1, double x2, double t2) {
  const double slope = (t2 - t1) / (x2 - x1);
  return {std::max(0.0, t1 - slope * x1), slope};
}

// Least squares through (x, seconds) points: (intercept seconds >= 0, seconds per x).
std::pair<double, double> least_squares(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = static_cast<double>(x.size());
  double mx = 0.0, my = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    mx += x[i] / n;
    my += y[i] / n;
  }
  double sxx = 0.0, sxy = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  const double slope = sxx > 0.0 ? sxy / sxx : 0.0;
  return {std::max(0.0, my - slope * mx), slope};
}

std::uint64_t read_meminfo(const char* key) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> name >> kib >> unit) {
    if (name == std::string(key) + ":") return kib * 1024;
  }
  return 0;
}

}  // namespace

kv::soc::SocProfile calibrate_host(const CalibrationOptions& options) {
  using namespace kv::soc;
  const auto say = [&](const std::string& line) {
    if (options.progress) options.progress(line);
  };
  const double t = options.min_seconds;
  const bool quick = options.quick;
  const int short_ctx = quick ? 512 : 1024, long_ctx = quick ? 2048 : 8192;
  // The kernels at three contexts, two copies each taking turns, as two sampled layers do in a run.
  const std::vector<int> decode_contexts = quick ? std::vector<int>{512, 1024, 2048} : std::vector<int>{1024, 4096, 16384};
  const std::string contexts = fmt::format("contexts {}, {} and {} (two copies taking turns)", decode_contexts[0], decode_contexts[1],
                                           decode_contexts[2]);
  const std::string two_contexts = fmt::format("contexts {} and {}", short_ctx, long_ctx);
  const std::size_t stream_bytes = quick ? 64ull << 20 : 256ull << 20;
  const std::size_t hops = quick ? 200'000 : 2'000'000;
  SocProfile p;
  p.name = "host";
  const MachineInfo machine = machine_info();
  kv::ThreadPool sizing(options.threads);
  const int threads = sizing.size();
  const std::string isa(kv::isa_name(kv::best_isa()));
  p.description = fmt::format("This machine, measured by kvbench calibrate: {}, {} threads, kernels {}, kvbench {}", machine.cpu_model,
                              threads, isa, KVBENCH_GIT_SHA);

  // Memory.
  const std::uint64_t total = read_meminfo("MemTotal"), available = read_meminfo("MemAvailable");
  p.memory_capacity_bytes = Quantity{static_cast<double>(total), "bytes", "", "measured: /proc/meminfo MemTotal"};
  p.model_budget_bytes = Quantity{static_cast<double>(std::min(available, total)), "bytes", "",
                                  "measured: /proc/meminfo MemAvailable when calibrated (what other processes left)"};
  p.runtime_reserve_bytes = Quantity{256.0 * (1 << 20), "bytes", "",
                                     "estimate: kvbench's own buffers, thread stacks and the model's activations at 32K context"};

  // L1: DRAM streams on one core and on all.
  const Stream one = stream_bandwidth(1, t, stream_bytes);
  const Stream all = stream_bandwidth(options.threads, t, stream_bytes);
  say(fmt::format("DRAM stream: read {:.1f} GB/s (1 core {:.1f}), write {:.1f} ({:.1f}), copy {:.1f} ({:.1f})", all.read, one.read,
                  all.write, one.write, all.copy, one.copy));
  const double dram_latency = chase_latency_us(stream_bytes, hops);
  say(fmt::format("DRAM latency: {:.3f} us", dram_latency));
  p.l1.capacity_bytes = p.memory_capacity_bytes;
  p.l1.read_gb_per_s = measured(all.read, "GB/s", fmt::format("{} MiB sum on {} threads (1 thread: {:.2f} GB/s)", stream_bytes >> 20, threads, one.read));
  p.l1.write_gb_per_s = measured(all.write, "GB/s", fmt::format("{} MiB fill on {} threads (1 thread: {:.2f} GB/s)", stream_bytes >> 20, threads, one.write));
  p.l1.latency_us = measured(dram_latency, "us", fmt::format("dependent loads over a random {} MiB cycle", stream_bytes >> 20));

  // L0: this host has no SRAM arena the engine can address; the core's caches stand in.
  const double cache_latency = chase_latency_us(256u << 10, hops);
  std::uint64_t cache_bytes = 0;
  {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index2/size");
    std::string size;
    if (in >> size && !size.empty()) {
      cache_bytes = std::strtoull(size.c_str(), nullptr, 10);
      if (size.back() == 'K') cache_bytes <<= 10;
      if (size.back() == 'M') cache_bytes <<= 20;
    }
  }
  p.l0.capacity_bytes = cache_bytes > 0 ? Quantity{static_cast<double>(cache_bytes), "bytes", "",
                                                   "measured: cpu0's L2 cache size from sysfs (the host's on-chip memory)"}
                                        : Quantity{1 << 20, "bytes", "", "estimate: sysfs gives no cache size; 1 MiB"};
  {
    constexpr std::size_t kBytes = 256u << 10;
    std::vector<char> a(kBytes, 1), b(kBytes, 2);
    const double s = seconds_per_call([&] { std::memcpy(b.data(), a.data(), kBytes); }, t / 4);
    const double gbps = static_cast<double>(kBytes) / s * 1e-9 * threads;  // bytes copied: one direction's
    p.l0.read_gb_per_s = measured(gbps, "GB/s", fmt::format("256 KiB cache-resident memcpy on one core (bytes copied per second), "
                                                            "times {} cores", threads));
    p.l0.write_gb_per_s = p.l0.read_gb_per_s;
    say(fmt::format("on-chip (cache) copy: {:.1f} GB/s", gbps));
  }
  p.l0.latency_us = measured(cache_latency, "us", "dependent loads over a random 256 KiB cycle");

  auto& cpu = p.engines[static_cast<int>(EngineKind::Cpu)];
  cpu.present = true;
  p.prefill_engine = p.decode_engine = EngineKind::Cpu;
  p.transfers_overlap_compute = true;

  // Exponentials, one core times the pool (the kernels compute them on every thread).
  {
    std::vector<float> x = values(1 << 16, 3, false), y(x.size());
    const double s = seconds_per_call(
        [&] {
          for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::exp(x[i] * 0.1f);
        },
        t / 2);
    const double rate = static_cast<double>(x.size()) / s * 1e-9 * threads;
    cpu.exp_g_per_s = measured(rate, "Gexp/s", fmt::format("std::exp over 64K floats on one core, times {} threads", threads));
    say(fmt::format("exponentials: {:.2f} G/s", rate));
  }
  const double exp_seconds = 1.0 / (cpu.exp_g_per_s.value * 1e9);

  // Decode attention per format: one call at three contexts, fitted as a fixed cost per call
  // plus a cost per multiply-add, the exponentials taken out at the measured rate. Chunked
  // prefill on the same contexts: two query blocks of the blocked prefill kernel (fewer queries
  // would run as a multi-query decode, paged_attention.h).
  std::vector<double> call_us;
  constexpr int kQueries = 2 * kv::kPrefillQueryBlock;
  for (kv::Format f : kv::kAllFormats) {
    const auto q = values(static_cast<std::size_t>(kQHeads) * kHeadDim, 13, false);
    const auto block = values(static_cast<std::size_t>(kQueries) * kQHeads * kHeadDim, 14, false);
    std::vector<float> out(block.size());
    std::vector<double> decode_x, decode_y, prefill_x, prefill_y;
    // As the engine counts them: a decode call's q.k and p.v multiply-adds and exponentials; a
    // prefill block's n (2 stored - n + 1) / 2 query-key pairs, times q heads and head_dim, for K and V.
    const auto decode_macs = [](int ctx) { return 2.0 * ctx * kQHeads * kHeadDim; };
    const auto prefill_macs = [](int ctx) { return 2.0 * kQueries * (2.0 * ctx - kQueries + 1) / 2.0 * kQHeads * kHeadDim; };
    for (int ctx : decode_contexts) {
      Contexts c = make_contexts(f, ctx, options.threads);
      const double d = seconds_per_call([&] { c.cache->attend(c.take(), 0, q.data(), 1, out.data()); }, t);
      const double pf = seconds_per_call([&] { c.cache->attend(c.take(), 0, block.data(), kQueries, out.data()); }, t);
      decode_x.push_back(decode_macs(ctx));
      decode_y.push_back(d - static_cast<double>(ctx) * kQHeads * exp_seconds);
      prefill_x.push_back(prefill_macs(ctx));
      prefill_y.push_back(pf - prefill_macs(ctx) / 2.0 / kHeadDim * exp_seconds);
    }
    const std::string name(kv::format_name(f));
    {
      const auto [fixed, per_mac] = least_squares(decode_x, decode_y);
      const double rate = per_mac > 0.0 ? 1e-9 / per_mac : 1e-9 * decode_x.back() / decode_y.back();
      call_us.push_back(fixed * 1e6);
      cpu.decode_gmac_per_s[static_cast<int>(f)] =
          measured(rate, "GMAC/s", fmt::format("KVCache::attend, one query, {} K/V, 32 q / 8 kv heads x 128, {}, least-squares slope "
                                               "of time per multiply-add less exponentials",
                                               name, contexts));
      say(fmt::format("decode attention {}: {:.2f} GMAC/s, {:.1f} us per call", name, rate, fixed * 1e6));
    }
    {
      const auto [fixed, per_mac] = least_squares(prefill_x, prefill_y);
      const double rate = per_mac > 0.0 ? 1e-9 / per_mac : 1e-9 * prefill_x.back() / prefill_y.back();
      cpu.prefill_gmac_per_s[static_cast<int>(f)] = measured(
          rate, "GMAC/s", fmt::format("KVCache::attend, {} queries, {} K/V, {}, least-squares slope less exponentials", kQueries, name, contexts));
      say(fmt::format("prefill attention {}: {:.2f} GMAC/s", name, rate));
    }
  }
  std::sort(call_us.begin(), call_us.end());
  cpu.attention_call_us = measured(call_us[call_us.size() / 2], "us", "intercept of the decode fits, median over formats");

  // Sealing pages: appending whole pages (copy, quantization, summaries) into a fresh sequence.
  for (kv::Format f : kv::kAllFormats) {
    const int kTokens = quick ? 1024 : 4096;
    kv::KVCache cache(shape(f, kTokens, options.threads));
    const std::size_t count = static_cast<std::size_t>(kTokens) * kKvHeads * kHeadDim;
    const auto k = values(count, 21, true);
    const auto v = values(count, 22, false);
    const double s = seconds_per_call(
        [&] {
          const kv::SeqId seq = cache.create_sequence();
          cache.append(seq, 0, k.data(), v.data(), kTokens);
          cache.release(seq);
        },
        t);
    const double rate = 2.0 * static_cast<double>(count) / s * 1e-9;
    const std::string name(kv::format_name(f));
    cpu.quantize_gvalue_per_s[static_cast<int>(f)] =
        measured(rate, "Gvalue/s", fmt::format("KVCache::append of {} tokens into {} pages (K and V values per second)", kTokens, name));
    say(fmt::format("page sealing {}: {:.2f} Gvalue/s", name, rate));
  }

  // Selection: Quest bounds and the plan over the page summaries at the two contexts, fitted as
  // a fixed cost per selection plus a cost per bound product.
  {
    kv::ThreadPool pool(options.threads);
    const auto q = values(static_cast<std::size_t>(kQHeads) * kHeadDim, 15, false);
    kv::SparsePolicy policy;
    policy.selector = kv::Selector::Hybrid;
    policy.budget = 0.10f;
    double seconds[2] = {}, products[2] = {};
    int i = 0;
    for (int ctx : {short_ctx, long_ctx}) {
      Contexts c = make_contexts(kv::Format::Q4, ctx, options.threads);
      std::vector<kv::HeadKeyBounds> bounds;
      c.cache->key_bounds(c.copies[0], 0, bounds);
      const std::size_t pages = bounds[0].pages(kHeadDim);
      std::vector<std::vector<float>> accumulated(kKvHeads, std::vector<float>(pages, 0.0f));
      std::mt19937 rng(4);
      std::uniform_real_distribution<float> mass(0.0f, 1.0f);
      for (auto& head : accumulated) {
        for (float& x : head) x = mass(rng);
      }
      seconds[i] = seconds_per_call(
          [&] {
            const auto b = kv::quest_bounds(bounds, kHeadDim, q.data(), kQHeads, kv::page_kernels(c.cache->isa()), &pool);
            const kv::SelectionInput input{ctx, kPageTokens, kKvHeads, &b, &accumulated};
            const kv::SelectionPlan plan = kv::plan_selection(policy, input, &pool);
            volatile std::size_t keep = plan.heads.size();
            (void)keep;
          },
          t);
      products[i] = static_cast<double>(pages) * kQHeads * kHeadDim;
      ++i;
    }
    const auto [fixed, per_product] = line(products[0], seconds[0], products[1], seconds[1]);
    const double rate = per_product > 0.0 ? 1e-9 / per_product : products[1] / seconds[1] * 1e-9;
    cpu.quest_bounds_gproduct_per_s = measured(
        rate, "Gproduct/s", "quest_bounds and plan_selection (hybrid, 10%) over q4 " + two_contexts + ", slope per bound product");
    cpu.select_call_us = measured(fixed * 1e6, "us", "intercept of the same fit: the fixed cost of one selection");
    say(fmt::format("selection: {:.2f} Gproduct/s, {:.1f} us per selection", rate, fixed * 1e6));
  }

  // What the swapping decode below waited for the device, for the L2 latency the engine sees.
  double swap_wait_s = 0.0, swap_device_pages = 0.0, swap_device_bytes = 0.0;

  // Sparse decode through the decoder, on a pool without and with an L1 cap: what the kernel,
  // call and selection rates above do not explain is charged per context page (selection
  // history, page views) and per page the capped pool manages (importance, prediction).
  {
    const ScopedDir scoped(options.l2_dir, "kvbench-calibrate-pool");
    const std::filesystem::path& dir = scoped.path();
    kv::SparsePolicy policy;
    policy.selector = kv::Selector::Hybrid;
    policy.budget = 0.10f;
    policy.sample_every = 1 << 30;
    const auto q = values(static_cast<std::size_t>(kQHeads) * kHeadDim, 16, false);
    std::vector<float> out(q.size());
    // residual ms per call and pages per call, [capped][context]
    double residual[2][2] = {}, context_pages[2][2] = {}, managed_pages[2][2] = {};
    for (int capped = 0; capped < 2; ++capped) {
      kv::MemoryConfig memory;
      if (capped != 0) {
        memory.l1_bytes = 8ull << 30;  // a cap nothing reaches: the bookkeeping without demotion
        memory.l2.dir = dir.string();
      }
      int i = 0;
      for (int ctx : {short_ctx, long_ctx}) {
        OpsSum sink;
        Contexts c = make_contexts(kv::Format::Q4, ctx, options.threads, &sink, &memory);
        kv::SparseDecoder decoder(*c.cache, policy, &sink);
        sink.reset();
        const double seconds = seconds_per_call(
            [&] {
              decoder.attend(c.take(), 0, q.data(), out.data());
              decoder.end_step();
            },
            t);
        kv::soc::StepOps step;
        step.phase = kv::Phase::Decode;
        step.attention = sink.ops;
        const double calls = static_cast<double>(std::max<std::uint64_t>(sink.calls, 1));
        context_pages[capped][i] = static_cast<double>(sink.ops.context_pages) / calls;
        managed_pages[capped][i] = static_cast<double>(sink.ops.managed_pages) / calls;
        double prefetch = 0.0;
        const double predicted = kv::soc::price_step(step, {}, p, 0.0, prefetch).ms / calls;
        residual[capped][i] = seconds * 1e3 - predicted;
        ++i;
      }
    }
    const double per_context = std::max(0.0, (residual[0][1] - residual[0][0]) / (context_pages[0][1] - context_pages[0][0]));
    cpu.context_page_ns = measured(per_context * 1e6, "ns",
                                   "SparseDecoder::attend (hybrid 10%, q4, no L1 cap) at " + two_contexts + ": the time the kernel, call "
                                   "and selection rates leave unexplained, per context page");
    const double capped_extra[2] = {residual[1][0] - residual[0][0], residual[1][1] - residual[0][1]};
    const double per_managed = std::max(0.0, (capped_extra[1] - capped_extra[0]) / (managed_pages[1][1] - managed_pages[1][0]));
    cpu.managed_page_ns = measured(per_managed * 1e6, "ns",
                                   "the same with an L1 cap and an L2 directory: the extra time per page the capped pool manages");
    say(fmt::format("decode bookkeeping: {:.0f} ns per context page, {:.0f} ns more per managed page", per_context * 1e6,
                    per_managed * 1e6));

    // A cap that forces swapping: the engine's own work per page moved (copies into write
    // buffers, checksums, page tables, loads), the waits for the device taken out.
    {
      kv::CacheConfig config = shape(kv::Format::Q4, long_ctx, options.threads);
      const std::size_t minimum = kv::minimum_l1_bytes(config, long_ctx).bytes;
      const std::size_t kv_bytes = static_cast<std::size_t>(long_ctx / kPageTokens) * kKvHeads * kv::KVCache(config).layout().bytes;
      config.memory.l1_bytes = minimum + kv_bytes / 20;
      config.memory.l2.dir = dir.string();
      OpsSum sink;
      kv::KVCache cache(config, &sink);
      const kv::SeqId seq = cache.create_sequence();
      const std::size_t count = static_cast<std::size_t>(long_ctx) * kKvHeads * kHeadDim;
      const auto k = values(count, 41, true), v = values(count, 42, false);
      cache.append(seq, 0, k.data(), v.data(), long_ctx);
      // Query-aware selection with a different query each call: every call needs other pages.
      kv::SparsePolicy quest = policy;
      quest.selector = kv::Selector::Quest;
      kv::SparseDecoder decoder(cache, quest, &sink);
      std::vector<std::vector<float>> queries;
      for (unsigned i = 0; i < 16; ++i) queries.push_back(values(q.size(), 100 + i, false));
      int calls = 0;
      const auto call = [&] {
        decoder.attend(seq, 0, queries[static_cast<std::size_t>(calls) % queries.size()].data(), out.data());
        decoder.end_step();
        ++calls;
      };
      for (int warm = 0; warm < 8; ++warm) call();
      sink.reset();
      calls = 0;
      const std::uint64_t wait_before = cache.stats().memory.dma_wait_ns;
      const auto start = Clock::now();
      while (seconds_since(start) < 4 * t || calls < 16) call();
      const double seconds = seconds_since(start);
      const double wait = static_cast<double>(cache.stats().memory.dma_wait_ns - wait_before) * 1e-9;
      swap_wait_s = wait;
      const auto device = [](std::uint64_t pages, std::uint64_t buffered) { return static_cast<double>(pages - std::min(pages, buffered)); };
      swap_device_pages = device(sink.ops.demand_pages, sink.ops.demand_buffered);
      swap_device_bytes = sink.ops.demand_pages > 0 ? static_cast<double>(sink.ops.demand_bytes) * swap_device_pages /
                                                          static_cast<double>(sink.ops.demand_pages)
                                                    : 0.0;
      kv::soc::StepOps step;
      step.phase = kv::Phase::Decode;
      step.attention = sink.ops;
      // The L2 figures are measured later: this fit prices the engine's own work alone.
      step.attention.demand_pages = step.attention.prefetch_pages = step.attention.demoted_pages = 0;
      step.attention.bytes_read[static_cast<int>(kv::Tier::L2)] = {};
      step.attention.bytes_written[static_cast<int>(kv::Tier::L2)] = {};
      double prefetch = 0.0;
      const kv::soc::StepCost modelled = kv::soc::price_step(step, {}, p, 0.0, prefetch);
      const double moved = static_cast<double>(sink.ops.demand_pages + sink.ops.prefetch_pages + sink.ops.demoted_pages);
      const double engine_ms = (seconds - wait) * 1e3 - (modelled.ms - modelled.dma_wait_ms);
      const double per_page = moved > 0.0 ? std::max(0.0, engine_ms / moved) : 0.0;
      cpu.l2_page_us = measured(per_page * 1e3, "us",
                                fmt::format("SparseDecoder::attend (Quest 10%, a new query each call, q4, {} tokens) with L1 capped at 5% of its KV above "
                                            "the minimum: time not waiting for the device and not explained by the rates above, per page "
                                            "moved ({:.0f} pages per call)",
                                            long_ctx, moved / calls));
      say(fmt::format("L2 traffic bookkeeping: {:.1f} us per page moved ({:.0f} per call)", per_page * 1e3, moved / calls));
    }
  }

  // Dense layers: f32 matrix-vector (one token) and a 16-token batch over a 4096 x 4096 weight,
  // through the BLAS calls the llama backend makes (kv::dense_f32). kvbench runs dense layers
  // in f32 only.
  {
    constexpr int kDim = 4096;
    const auto w = values(static_cast<std::size_t>(kDim) * kDim, 31, false);
    kv::ThreadPool pool(options.threads);
    const auto rate_for = [&](int tokens) {
      const auto x = values(static_cast<std::size_t>(kDim) * tokens, 32, false);
      std::vector<float> y(static_cast<std::size_t>(kDim) * tokens);
      const double s = seconds_per_call([&] { kv::dense_f32(pool, x.data(), tokens, w.data(), kDim, kDim, y.data()); }, t);
      return static_cast<double>(kDim) * kDim * tokens / s * 1e-9;
    };
    const double decode = rate_for(1), batched = rate_for(16);
    for (int i = 0; i < kWeightFormatCount; ++i) {
      const bool f32 = i == 0;
      const std::string note = f32 ? "" : "; derived: kvbench has no dense kernel in this precision, so the f32 rate stands in";
      cpu.dense_decode_gmac_per_s[static_cast<std::size_t>(i)] =
          Quantity{decode, "GMAC/s", "", "measured by kvbench calibrate: f32 4096x4096 matrix-vector (BLAS sgemv) on the pool" + note};
      cpu.dense_gmac_per_s[static_cast<std::size_t>(i)] =
          Quantity{batched, "GMAC/s", "", "measured by kvbench calibrate: f32 4096x4096 times 16 tokens (BLAS sgemm) on the pool" + note};
    }
    say(fmt::format("dense f32: {:.2f} GMAC/s (one token), {:.2f} (16 tokens)", decode, batched));
  }

  // L2: the engine's own store in the directory: sequential write, sequential and random
  // page reads, 4 KiB reads. The migrator has one read in flight at a time.
  {
    kv::L2Config config;
    config.dir = options.l2_dir;
    kv::validate_l2_config(config);
    const ScopedDir scoped(options.l2_dir, "kvbench-calibrate");
    const std::filesystem::path& dir = scoped.path();
    config.dir = dir.string();
    constexpr std::size_t kPage = 36864;  // a 64-token f16 page of 8 kv heads' one head (K, V, summaries), 4 KiB padded
    const std::size_t kTotal = quick ? 32ull << 20 : 192ull << 20;
    const std::size_t pages = kTotal / kPage;
    std::vector<std::byte> page(kPage, std::byte{7});
    std::vector<kv::L2Slot> slots;
    slots.reserve(pages);
    std::string mode;
    double write_gbps = 0.0, read_gbps = 0.0, random_gbps = 0.0, latency = 0.0;
    std::size_t shuffled_count = 0;
    {
      kv::L2Store store(config);
      mode = kv::l2_mode_name(store.mode());
      const auto start = Clock::now();
      for (std::size_t i = 0; i < pages; ++i) {
        page[i % kPage] = static_cast<std::byte>(i);
        slots.push_back(store.append(page.data(), kPage));
        if (slots.back() == kv::kNoSlot) throw kv::InputError(options.l2_dir, "--l2-dir", "the L2 store refused a page: " + store.failure());
      }
      if (!store.write_pending(true)) throw kv::InputError(options.l2_dir, "--l2-dir", "an L2 write failed: " + store.failure());
      write_gbps = static_cast<double>(pages * kPage) / seconds_since(start) * 1e-9;
      std::vector<std::byte> dst(kPage);
      auto begin = Clock::now();
      for (kv::L2Slot slot : slots) store.read(slot, dst.data());
      read_gbps = static_cast<double>(pages * kPage) / seconds_since(begin) * 1e-9;
      std::vector<kv::L2Slot> shuffled = slots;
      std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(9));
      shuffled.resize(std::min<std::size_t>(shuffled.size(), quick ? 300 : 2000));
      begin = Clock::now();
      for (kv::L2Slot slot : shuffled) store.read(slot, dst.data());
      const double s = seconds_since(begin);
      random_gbps = static_cast<double>(shuffled.size() * kPage) / s * 1e-9;
      latency = s / static_cast<double>(shuffled.size()) * 1e6;
      shuffled_count = shuffled.size();
    }
    // 4 KiB random reads of a file written for it, bypassing the page cache like the store.
    double iops = 0.0;
    {
      const std::string file = (dir / "random-4k").string();
      kv::FileIo& io = kv::posix_file_io();
      const int fd = io.open(file, O_RDWR | O_CREAT | O_TRUNC, 0600);
      if (fd < 0) throw kv::InputError(file, "open", std::strerror(-fd));
      const std::size_t kFile = quick ? 16ull << 20 : 64ull << 20;
      std::vector<char> block(1 << 20, 'x');
      for (std::size_t off = 0; off < kFile; off += block.size()) {
        const ssize_t wrote = io.pwrite(fd, block.data(), block.size(), static_cast<off_t>(off));
        if (wrote != static_cast<ssize_t>(block.size())) {
          io.close(fd);
          throw kv::InputError(file, "pwrite", wrote < 0 ? std::strerror(static_cast<int>(-wrote)) : "a short write");
        }
      }
      if (const int synced = io.fdatasync(fd); synced < 0) {
        io.close(fd);
        throw kv::InputError(file, "fdatasync", std::strerror(-synced));
      }
      io.drop_cache(fd, 0, static_cast<off_t>(kFile));
      io.close(fd);
      struct Fd {
        int fd = -1;
        ~Fd() {
          if (fd >= 0) ::close(fd);
        }
      } reader;
      reader.fd = ::open(file.c_str(), O_RDONLY | O_DIRECT);
      if (reader.fd < 0) reader.fd = ::open(file.c_str(), O_RDONLY);
      if (reader.fd < 0) throw kv::InputError(file, "open", std::strerror(errno));
      void* raw = nullptr;
      if (posix_memalign(&raw, 4096, 4096) != 0) throw std::bad_alloc();
      std::unique_ptr<void, decltype(&std::free)> buffer(raw, &std::free);
      std::mt19937 rng(17);
      std::uniform_int_distribution<std::size_t> pick(0, kFile / 4096 - 1);
      const int kReads = quick ? 500 : 4000;
      int done = 0;
      const auto begin = Clock::now();
      for (; done < kReads; ++done) {
        const ssize_t got = ::pread(reader.fd, buffer.get(), 4096, static_cast<off_t>(pick(rng) * 4096));
        if (got != 4096) throw kv::InputError(file, "pread", got < 0 ? std::strerror(errno) : "a short read");
      }
      iops = done / seconds_since(begin);
    }
    const std::string fs = kv::filesystem_type(options.l2_dir);
    const std::string where = fmt::format("{} ({}, {} I/O)", options.l2_dir, fs, mode);
    p.l2.capacity_bytes = Quantity{static_cast<double>(std::filesystem::space(options.l2_dir).capacity), "bytes", "",
                                   "measured: the L2 directory's filesystem size (statvfs)"};
    p.l2.write_gb_per_s = measured(write_gbps, "GB/s", fmt::format("L2Store sequential appends of {} MiB of 36 KiB pages to ", kTotal >> 20) + where);
    p.l2.read_gb_per_s = measured(read_gbps, "GB/s", "L2Store::read of those pages in order from " + where);
    // A read costs latency + bytes / rate: the latency from the 4 KiB reads, the rate from what
    // a page read takes beyond it (else the latency would be counted twice).
    const double latency_4k = 1e6 / iops;
    const double beyond = latency - latency_4k;
    const double page_rate = beyond > 0.0 ? static_cast<double>(kPage - 4096) / (beyond * 1e-6) * 1e-9 : random_gbps;
    // The latency the engine sees: its demand loads in the swapping decode above waited for the
    // migrator's queue (behind its own demotion writes) as well as for the device.
    const double engine_latency =
        swap_device_pages > 0.0 ? (swap_wait_s - swap_device_bytes / (page_rate * 1e9)) / swap_device_pages * 1e6 : 0.0;
    if (engine_latency > latency_4k) {
      p.l2.latency_us = measured(engine_latency, "us",
                                 fmt::format("the swapping decode's wait per demand load from the device, less its bytes at the page "
                                             "rate ({:.0f} loads; a bare 4 KiB pread on {} takes {:.0f} us, 1 / IOPS)",
                                             swap_device_pages, where, latency_4k));
    } else {
      p.l2.latency_us = measured(latency_4k, "us", "one random 4 KiB pread, one in flight, on " + where + " (1 / IOPS)");
    }
    p.l2.random_read_page_gb_per_s = measured(
        page_rate, "GB/s",
        fmt::format("L2Store::read of {} pages (36 KiB) in random order from {}: {:.0f} us each, less the 4 KiB latency, for the "
                    "bytes beyond 4 KiB ({:.2f} GB/s all in)",
                    shuffled_count, where, latency, random_gbps));
    p.l2.random_read_4k_iops = measured(iops, "IOPS", "random 4 KiB preads, one in flight, on " + where);
    p.l2.queue_depth = Quantity{1.0, "requests", "", "derived: kvbench's migrator issues one read at a time"};
    say(fmt::format("L2 {}: write {:.2f} GB/s, read {:.2f} GB/s, random pages {:.2f} GB/s ({:.0f} us each), 4 KiB {:.0f} IOPS; "
                    "latency as the engine sees it {:.0f} us",
                    where, write_gbps, read_gbps, random_gbps, latency, iops, p.l2.latency_us.value));
  }

  // Energy: this host has no counters kvbench reads; per-operation estimates from a published
  // survey (45 nm figures: an upper bound for a modern CPU).
  const std::string horowitz = "M. Horowitz, Computing's energy problem (and what we can do about it), ISSCC 2014, 45 nm";
  p.energy.pj_per_byte[1] = Quantity{160.0, "pJ/byte", "", "derived from " + horowitz + ": DRAM 32-bit read 640 pJ / 4 bytes"};
  p.energy.pj_per_byte[0] = Quantity{1.25, "pJ/byte", "", "derived from " + horowitz + ": 8 KB SRAM 32-bit read 5 pJ / 4 bytes"};
  p.energy.pj_per_byte[2] = Quantity{1700.0, "pJ/byte", "",
                                     "estimate: an NVMe SSD reading 3 GB/s at about 5 W active power (5 J/s / 3e9 B/s)"};
  p.energy.pj_per_mac[0] = Quantity{4.6, "pJ/MAC", "", "derived from " + horowitz + ": fp32 multiply 3.7 pJ + add 0.9 pJ"};
  p.energy.pj_per_mac[1] = Quantity{1.5, "pJ/MAC", "", "derived from " + horowitz + ": fp16 multiply 1.1 pJ + add 0.4 pJ"};
  p.energy.pj_per_mac[2] = Quantity{0.23, "pJ/MAC", "", "derived from " + horowitz + ": int8 multiply 0.2 pJ + add 0.03 pJ"};
  p.energy.pj_per_mac[3] = Quantity{0.12, "pJ/MAC", "", "estimate: half the int8 figure (4-bit operands) from " + horowitz};
  p.energy.pj_per_exp = Quantity{46.0, "pJ", "", "estimate: about ten fp32 multiply-adds for a polynomial exp, from " + horowitz};

  // Calibrated rates are sustained by construction: the peak is the fastest kernel measured.
  double fastest = 0.0;
  for (const auto* rates : {&cpu.decode_gmac_per_s, &cpu.prefill_gmac_per_s}) {
    for (const Quantity& q : *rates) fastest = std::max(fastest, q.value);
  }
  for (const auto* rates : {&cpu.dense_gmac_per_s, &cpu.dense_decode_gmac_per_s}) {
    for (const Quantity& q : *rates) fastest = std::max(fastest, q.value);
  }
  cpu.peak_gmac_per_s = Quantity{fastest, "GMAC/s", "", "measured by kvbench calibrate: the fastest kernel rate above (this host's peak "
                                                        "is not read from a spec sheet)"};
  cpu.efficiency = Quantity{1.0, "ratio", "", "derived: every rate of this profile is a sustained measurement, not a share of a peak"};
  return p;
}

}  // namespace kvbench
