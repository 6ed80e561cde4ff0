// Memory quantities of the host profile: capacity, DRAM streams and latency, the on-chip
// stand-in for L0, the engine's own work per page it swaps, and the L2 device through the store.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "bench_common.h"
#include "calibration_fits.h"
#include "calibration_steps.h"
#include "kernel_benchmarks.h"
#include "machine.h"
#include "memory/tiered_pool.h"
#include "runtime/error.h"
#include "soc/cost_model.h"
#include "sparse/sparse_decoder.h"

namespace kvbench::calibration {

namespace {

using kv::soc::Quantity;

std::size_t stream_bytes(const Calibration& c) { return c.options.quick ? 64ull << 20 : 256ull << 20; }

// A directory of the calibration's own inside the L2 directory, removed with its files.
class ScopedDir {
 public:
  ScopedDir(const std::string& base, const std::string& stem) : path_(std::filesystem::path(base) / fmt::format("{}-{}", stem, ::getpid())) {
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
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace

void memory_capacity(kv::soc::SocProfile& p) {
  const auto total = static_cast<double>(machine_info().memory_bytes);
  const auto available = static_cast<double>(kv::mem_available_bytes());
  p.memory_capacity_bytes = Quantity{total, "bytes", "", "measured: physical memory (sysconf pages x page size)"};
  p.model_budget_bytes = Quantity{std::min(available, total), "bytes", "", "measured: /proc/meminfo MemAvailable when calibrated (what other processes left)"};
  p.runtime_reserve_bytes = Quantity{256.0 * (1 << 20), "bytes", "", "estimate: kvbench's own buffers, thread stacks and the model's activations at 32K context"};
  p.l1.capacity_bytes = p.memory_capacity_bytes;
}

void dram_bandwidth(Calibration& c, kv::soc::SocProfile& p) {
  using micro::StreamKind;
  const std::size_t bytes = stream_bytes(c);
  const std::pair<StreamKind, const char*> kinds[] = {{StreamKind::Read, "read"}, {StreamKind::Write, "write"}, {StreamKind::Copy, "copy"}};
  for (const auto& [kind, name] : kinds) {
    c.session.add(fmt::format("stream/{}/1", name), micro::stream_benchmark, kind, bytes, 1);
    c.session.add(fmt::format("stream/{}/all", name), micro::stream_benchmark, kind, bytes, c.options.threads);
  }
  const auto r = c.session.run();
  const auto gbps = [&](const char* name, const char* threads) { return r.at(fmt::format("stream/{}/{}", name, threads)).counter("bytes_per_second") * 1e-9; };
  const std::string size = fmt::format("{} MiB", bytes >> 20);
  p.l1.read_gb_per_s = measured(gbps("read", "all"), "GB/s", fmt::format("{} sum on {} threads (1 thread: {:.2f} GB/s)", size, c.threads, gbps("read", "1")));
  p.l1.write_gb_per_s = measured(gbps("write", "all"), "GB/s", fmt::format("{} fill on {} threads (1 thread: {:.2f} GB/s)", size, c.threads, gbps("write", "1")));
  c.say(fmt::format("DRAM stream: read {:.1f} GB/s (1 core {:.1f}), write {:.1f} ({:.1f}), copy {:.1f} ({:.1f})", gbps("read", "all"), gbps("read", "1"),
                    gbps("write", "all"), gbps("write", "1"), gbps("copy", "all"), gbps("copy", "1")));
}

void dram_latency(Calibration& c, kv::soc::SocProfile& p) {
  c.session.add("chase/dram", micro::chase_benchmark, stream_bytes(c));
  const double ns = c.session.run().at("chase/dram").counter("ns_per_load");
  p.l1.latency_us = measured(ns * 1e-3, "us", fmt::format("dependent loads over a random {} MiB cycle", stream_bytes(c) >> 20));
  c.say(fmt::format("DRAM latency: {:.3f} us", ns * 1e-3));
}

void on_chip_memory(Calibration& c, kv::soc::SocProfile& p) {
  // This host has no SRAM arena the engine can address; the core's caches stand in.
  constexpr std::size_t kBytes = 256u << 10;
  const std::uint64_t cache = l2_cache_bytes();
  p.l0.capacity_bytes = cache > 0 ? Quantity{static_cast<double>(cache), "bytes", "", "measured: cpu0's L2 cache size from sysfs (the host's on-chip memory)"}
                                  : Quantity{1 << 20, "bytes", "", "estimate: sysfs gives no cache size; 1 MiB"};
  c.session.add("memcpy/256KiB", micro::memcpy_benchmark, kBytes);
  c.session.add("chase/256KiB", micro::chase_benchmark, kBytes);
  const auto r = c.session.run();
  const double gbps = r.at("memcpy/256KiB").counter("bytes_per_second") * 1e-9 * c.threads;
  p.l0.read_gb_per_s = measured(gbps, "GB/s", fmt::format("256 KiB cache-resident memcpy on one core (bytes copied per second), times {} cores", c.threads));
  p.l0.write_gb_per_s = p.l0.read_gb_per_s;
  p.l0.latency_us = measured(r.at("chase/256KiB").counter("ns_per_load") * 1e-3, "us", "dependent loads over a random 256 KiB cycle");
  c.say(fmt::format("on-chip (cache) copy: {:.1f} GB/s", gbps));
}

SwapWaits l2_page_bookkeeping(Calibration& c, kv::soc::SocProfile& p) {
  // A cap that forces swapping: the engine's own work per page moved (copies into write
  // buffers, checksums, page tables, loads), the waits for the device taken out.
  const ScopedDir dir(c.options.l2_dir, "kvbench-calibrate-swap");
  // The full selection context even in quick mode: a shorter one leaves the capped pool room
  // for what Quest keeps, and too few pages move for a figure per page.
  const int ctx = cases::selection_contexts(false).back();
  kv::CacheConfig config = cases::layer_config(kv::Format::Q4, ctx, c.options.threads);
  const std::size_t kv_bytes = static_cast<std::size_t>(ctx / cases::kLayer.page_tokens) * cases::kLayer.kv_heads * kv::KVCache(config).layout().bytes;
  DecodeOps sink;
  micro::SparseDecodeCase swap;
  swap.policy.selector = kv::Selector::Quest;  // query-aware, a different query each call: every call needs other pages
  swap.policy.budget = 0.10f;
  swap.policy.sample_every = 1 << 30;
  swap.ctx = ctx;
  swap.memory.l1_bytes = kv::minimum_l1_bytes(config, ctx).bytes + kv_bytes / 20;
  swap.memory.l2.dir = dir.path();
  swap.new_query_each_call = true;
  swap.warm_calls = 8;
  swap.telemetry = &sink;
  c.session.add("sparse-decode/swapping", micro::sparse_decode_benchmark, swap);
  const micro::BenchmarkFigures f = c.session.run().at("sparse-decode/swapping");
  const double calls = sink.calls();
  const double wait = f.counter("dma_wait_s");
  const double device_loads = static_cast<double>(sink.ops.demand_pages - std::min(sink.ops.demand_pages, sink.ops.demand_buffered));
  SwapWaits waits;
  waits.device_loads = device_loads / calls;
  waits.device_bytes = sink.ops.demand_pages > 0 ? static_cast<double>(sink.ops.demand_bytes) * device_loads / static_cast<double>(sink.ops.demand_pages) / calls : 0.0;
  waits.waited_s = wait;
  waits.device_rounds = sink.device_rounds / calls;
  const auto& written = sink.ops.bytes_written[static_cast<int>(kv::Tier::L2)];
  waits.written_bytes = static_cast<double>(std::accumulate(written.begin(), written.end(), std::uint64_t{0})) / calls;
  waits.call_s = f.seconds_per_iteration;
  // The L2 figures are measured by l2_device: this prices the engine's own work alone.
  kv::soc::StepOps step;
  step.phase = kv::Phase::Decode;
  step.attention = sink.ops;
  step.attention.demand_pages = step.attention.prefetch_pages = step.attention.demoted_pages = step.attention.demand_waits = 0;
  step.attention.bytes_read[static_cast<int>(kv::Tier::L2)] = {};
  step.attention.bytes_written[static_cast<int>(kv::Tier::L2)] = {};
  double prefetch = 0.0;
  const kv::soc::StepCost modelled = kv::soc::price_step(step, {}, p, 0.0, prefetch);
  const double moved = static_cast<double>(sink.ops.demand_pages + sink.ops.prefetch_pages + sink.ops.demoted_pages) / calls;
  const double engine_ms = (f.seconds_per_iteration - wait) * 1e3 - (modelled.ms - modelled.dma_wait_ms) / calls;
  const double per_page = moved > 0.0 ? std::max(0.0, engine_ms / moved) : 0.0;
  p.engines[static_cast<int>(kv::soc::EngineKind::Cpu)].l2_page_us =
      measured(per_page * 1e3, "us",
               fmt::format("SparseDecoder::attend (Quest 10%, a new query each call, q4, {} tokens) with L1 capped at 5% of its KV above the minimum: "
                           "time not waiting for the device and not explained by the rates above, per page moved ({:.1f} pages per call)",
                           ctx, moved));
  c.say(fmt::format("L2 traffic bookkeeping: {:.1f} us per page moved ({:.1f} per call)", per_page * 1e3, moved));
  return waits;
}

void l2_device(Calibration& c, kv::soc::SocProfile& p, const SwapWaits& swap) {
  kv::L2Config config;
  config.dir = c.options.l2_dir;
  kv::validate_l2_config(config);
  const ScopedDir dir(c.options.l2_dir, "kvbench-calibrate");
  constexpr std::size_t kPage = 36864;  // a 64-token f16 page of one kv head (K, V, summaries), 4 KiB padded
  const std::size_t total = c.options.quick ? 32ull << 20 : 192ull << 20;
  using micro::L2Access;
  c.session.add("l2/write", micro::l2_benchmark, dir.path(), L2Access::Write, kPage, total);
  c.session.add("l2/read-in-order", micro::l2_benchmark, dir.path(), L2Access::ReadInOrder, kPage, total);
  c.session.add("l2/read-random", micro::l2_benchmark, dir.path(), L2Access::ReadRandom, kPage, total);
  c.session.add("l2/read-random-under-writes", micro::l2_benchmark, dir.path(), L2Access::ReadRandomUnderWrites, kPage, total);
  c.session.add("l2/read-4k", micro::l2_4k_read_benchmark, dir.path(), c.options.quick ? 16ull << 20 : 64ull << 20);
  const auto r = c.session.run();
  const double write = r.at("l2/write").counter("bytes_per_second") * 1e-9, read = r.at("l2/read-in-order").counter("bytes_per_second") * 1e-9;
  const double random = r.at("l2/read-random").counter("bytes_per_second") * 1e-9, page_us = r.at("l2/read-random").counter("us_per_page");
  const double iops = r.at("l2/read-4k").counter("reads_per_second");
  const double page_under_writes_us = r.at("l2/read-random-under-writes").counter("us_per_page");
  const double behind_write_us = std::max(0.0, page_under_writes_us - page_us);
  const std::string where = fmt::format("{} ({}, {})", c.options.l2_dir, kv::filesystem_type(c.options.l2_dir), r.at("l2/write").label);
  p.l2.capacity_bytes = Quantity{static_cast<double>(std::filesystem::space(c.options.l2_dir).capacity), "bytes", "", "measured: the L2 directory's filesystem size (statvfs)"};
  p.l2.write_gb_per_s = measured(write, "GB/s", fmt::format("L2Store sequential appends of {} MiB of 36 KiB pages, flushed, to ", total >> 20) + where);
  p.l2.read_gb_per_s = measured(read, "GB/s", "L2Store::read of those pages in order from " + where);
  const double latency_4k = 1e6 / iops;
  const double page_rate = l2_page_rate_gbps(page_us, latency_4k, static_cast<double>(kPage), random);
  // The latency the engine sees per round trip: its demand loads in the swapping decode waited
  // for the migrator's reader threads (l2_queue_depth of them) as well as for the device, and
  // behind its demotions for the share of the call they kept the device writing - which the
  // model adds back per step from that step's own writes.
  const int readers = kv::L2Config{}.queue_depth;
  const double busy = swap.call_s > 0.0 ? std::min(1.0, swap.written_bytes / (write * 1e9) / swap.call_s) : 0.0;
  const double engine_latency = l2_engine_latency_us(swap.waited_s, swap.device_rounds, swap.device_bytes, page_rate) - busy * behind_write_us;
  p.l2.queue_depth = Quantity{static_cast<double>(readers), "requests", "",
                              fmt::format("derived: kvbench's migrator keeps up to {} reads in flight (l2_queue_depth's default)", readers)};
  if (engine_latency > latency_4k) {
    p.l2.latency_us = measured(engine_latency, "us",
                               fmt::format("the swapping decode's wait per round trip to the device ({:.1f} loads in {:.1f} rounds a call), less "
                                           "its bytes at the page rate and its wait behind writes ({:.0f}% of the call writing); a bare 4 KiB "
                                           "read on {} takes {:.0f} us, 1 / IOPS",
                                           swap.device_loads, swap.device_rounds, busy * 100.0, where, latency_4k));
  } else {
    p.l2.latency_us = measured(latency_4k, "us",
                               fmt::format("one random 4 KiB read through FileIo, one in flight, on {} (1 / IOPS); the swapping decode's "
                                           "wait per round trip, less its bytes and its wait behind writes, came to {:.0f} us",
                                           where, engine_latency));
  }
  p.l2.random_read_page_gb_per_s = measured(page_rate, "GB/s",
                                            fmt::format("L2Store::read of 36 KiB pages in random order from {}: {:.0f} us each, less the 4 KiB latency, "
                                                        "for the bytes beyond 4 KiB ({:.2f} GB/s all in)",
                                                        where, page_us, random));
  p.l2.read_behind_write_us =
      measured(behind_write_us, "us",
               fmt::format("L2Store::read of 36 KiB pages in random order from {} while a second thread appends and flushes {} MiB batches to "
                           "the same store without pause: {:.0f} us each, less the {:.0f} us alone",
                           where, config.batch_bytes >> 20, page_under_writes_us, page_us));
  p.l2.random_read_4k_iops = measured(iops, "IOPS", "random 4 KiB reads through FileIo, one in flight, on " + where);
  c.say(fmt::format("L2 {}: write {:.2f} GB/s, read {:.2f} GB/s, random pages {:.2f} GB/s ({:.0f} us each), 4 KiB {:.0f} IOPS; latency as the engine sees it {:.0f} us, "
                    "{:.0f} us more per page read while it writes",
                    where, write, read, random, page_us, iops, p.l2.latency_us.value, behind_write_us));
}

}  // namespace kvbench::calibration
