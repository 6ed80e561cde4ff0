// BM_L2Write: sustained segment writes of q4 pages (7B layer shape) through the L2 store, in
// its batches, with the I/O mode it picked (O_DIRECT where the filesystem takes it), a writer
// thread writing full batches while the caller fills the next, as the migrator does. Each
// iteration writes 64 MiB of pages and then frees them, so segments are created and deleted
// as in a long run. bytes_per_second counts device bytes.
// BM_L2Read: positional reads of random pages from 256 MiB of written segments, checksums
// verified. bytes_per_second counts page bytes returned.
// BM_L2ReadSize/{read_bytes}/{queue_depth}: the device's answer to the read size and the queue
// depth - runs of adjacent pages read with one I/O (L2Store::read_run) at random places in
// 256 MiB of written segments, queue_depth threads issuing them at once, as the migrator's
// readers do. bytes_per_second counts page bytes returned; the ios_per_s counter the reads,
// us_per_io their mean latency (the wall time of each thread's reads over its I/O count).
// Where throughput stops growing with the read size is what l2.max_read_bytes should be; where
// it stops growing with the depth, l2.queue_depth.
// Files go to --l2-dir (default: the system temporary directory); the context records the
// filesystem and mode.
#include <benchmark/benchmark.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include "bench_common.h"
#include "memory/l2_store.h"
#include "runtime/error.h"
#include "quant/page_layout.h"

namespace {

using namespace kvbench::micro;

std::size_t q4_page_bytes() {
  return kv::PageLayout::make({64, 128, kv::Format::Q4, kv::Format::Q4, 32, false}).bytes;
}

void label(benchmark::State& state, const kv::L2Store& store) {
  state.SetLabel(std::string(kv::l2_mode_name(store.mode())) + " on " + store.fs_type() +
                 (store.on_ram() ? " (RAM, not flash!)" : ""));
}

// The store, or nullptr after reporting why it could not open (an unwritable --l2-dir).
std::unique_ptr<kv::L2Store> open_store(benchmark::State& state) {
  kv::L2Config config;
  config.dir = l2_dir();
  try {
    return std::make_unique<kv::L2Store>(config);
  } catch (const kv::InputError& error) {
    state.SkipWithError(error.what());
    return nullptr;
  }
}

void l2_write(benchmark::State& state) {
  const auto opened = open_store(state);
  if (!opened) return;
  kv::L2Store& store = *opened;
  // The writer thread: woken when a batch is full.
  std::mutex mutex;
  std::condition_variable wake;
  bool ready = false, stop = false;
  store.set_writer_wakeup([&] {
    std::lock_guard lock(mutex);
    ready = true;
    wake.notify_one();
  });
  std::thread writer([&] {
    std::unique_lock lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return ready || stop; });
      if (stop) return;
      ready = false;
      lock.unlock();
      store.write_pending(false);
      lock.lock();
    }
  });
  const std::size_t bytes = q4_page_bytes();
  const std::vector<float> noise = bench_values(bytes / sizeof(float) + 1, 21, false);
  const auto* page = reinterpret_cast<const std::byte*>(noise.data());
  const std::size_t pages = (64u << 20) / bytes;
  std::vector<kv::L2Slot> slots(pages);
  for (auto _ : state) {
    for (std::size_t i = 0; i < pages; ++i) slots[i] = store.append(page, bytes);
    if (!store.write_pending(true)) {
      state.SkipWithError(store.failure().c_str());
      break;
    }
    state.PauseTiming();
    for (kv::L2Slot slot : slots) store.release(slot);
    state.ResumeTiming();
  }
  {
    std::lock_guard lock(mutex);
    stop = true;
    wake.notify_one();
  }
  writer.join();
  const kv::L2Stats stats = store.stats();
  state.SetBytesProcessed(static_cast<int64_t>(stats.device_bytes_written));
  state.counters["write_amplification"] =
      static_cast<double>(stats.device_bytes_written) / static_cast<double>(stats.page_bytes_appended);
  label(state, store);
}

void l2_read(benchmark::State& state) {
  const auto opened = open_store(state);
  if (!opened) return;
  kv::L2Store& store = *opened;
  const std::size_t bytes = q4_page_bytes();
  const std::vector<float> noise = bench_values(bytes / sizeof(float) + 1, 22, false);
  const auto* page = reinterpret_cast<const std::byte*>(noise.data());
  std::vector<kv::L2Slot> slots((256u << 20) / bytes);
  for (kv::L2Slot& slot : slots) slot = store.append(page, bytes);
  store.write_pending(true);
  std::vector<std::byte> out(bytes);
  std::mt19937 rng(7);
  std::uniform_int_distribution<std::size_t> pick(0, slots.size() - 1);
  std::int64_t read = 0;
  for (auto _ : state) {
    for (int i = 0; i < 256; ++i) store.read(slots[pick(rng)], out.data());
    read += 256 * static_cast<std::int64_t>(bytes);
  }
  state.SetBytesProcessed(read);
  label(state, store);
}

// One store of written pages shared by the read-size sweep (writing 256 MiB per case would
// dominate its setup); kept until the process ends.
struct ReadSizeStore {
  std::unique_ptr<kv::L2Store> store;
  std::vector<kv::L2Slot> slots;  // in append order: adjacent slots lie together on the device
  std::string error;
};

ReadSizeStore& read_size_store() {
  static ReadSizeStore shared = [] {
    ReadSizeStore s;
    kv::L2Config config;
    config.dir = l2_dir();
    try {
      s.store = std::make_unique<kv::L2Store>(config);
    } catch (const kv::InputError& error) {
      s.error = error.what();
      return s;
    }
    const std::size_t bytes = q4_page_bytes();
    const std::vector<float> noise = bench_values(bytes / sizeof(float) + 1, 23, false);
    const auto* page = reinterpret_cast<const std::byte*>(noise.data());
    s.slots.resize((256u << 20) / bytes);
    for (kv::L2Slot& slot : s.slots) slot = s.store->append(page, bytes);
    if (!s.store->write_pending(true)) s.error = s.store->failure();
    return s;
  }();
  return shared;
}

void l2_read_size(benchmark::State& state) {
  ReadSizeStore& shared = read_size_store();
  if (!shared.error.empty()) {
    state.SkipWithError(shared.error.c_str());
    return;
  }
  kv::L2Store& store = *shared.store;
  const std::size_t bytes = q4_page_bytes();
  const auto run_pages = std::max<std::size_t>(1, static_cast<std::size_t>(state.range(0)) / bytes);
  const int depth = static_cast<int>(state.range(1));
  constexpr int kReadsPerThread = 32;
  std::int64_t read = 0, ios = 0;
  double io_seconds = 0.0;
  for (auto _ : state) {
    std::vector<std::thread> readers;
    std::vector<double> seconds(static_cast<std::size_t>(depth));
    std::vector<std::string> failures(static_cast<std::size_t>(depth));
    for (int t = 0; t < depth; ++t) {
      readers.emplace_back([&, t] {
        std::mt19937 rng(static_cast<unsigned>(31 + t + 97 * ios));
        std::uniform_int_distribution<std::size_t> pick(0, shared.slots.size() - run_pages);
        std::vector<std::byte> frames(run_pages * bytes);
        std::vector<kv::L2Slot> slots(run_pages);
        std::vector<std::byte*> dsts(run_pages);
        for (std::size_t i = 0; i < run_pages; ++i) dsts[i] = frames.data() + i * bytes;
        const auto start = std::chrono::steady_clock::now();
        for (int r = 0; r < kReadsPerThread; ++r) {
          const std::size_t first = pick(rng);
          for (std::size_t i = 0; i < run_pages; ++i) slots[i] = shared.slots[first + i];
          for (const std::string& error : store.read_run(slots, dsts)) {
            if (!error.empty()) failures[static_cast<std::size_t>(t)] = error;
          }
        }
        seconds[static_cast<std::size_t>(t)] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      });
    }
    for (std::thread& reader : readers) reader.join();
    for (const std::string& failure : failures) {
      if (!failure.empty()) {
        state.SkipWithError(failure.c_str());
        return;
      }
    }
    for (double s : seconds) io_seconds += s;
    ios += static_cast<std::int64_t>(depth) * kReadsPerThread;
    read += static_cast<std::int64_t>(depth) * kReadsPerThread * static_cast<std::int64_t>(run_pages * bytes);
  }
  state.SetBytesProcessed(read);
  state.counters["ios_per_s"] = benchmark::Counter(static_cast<double>(ios), benchmark::Counter::kIsRate);
  state.counters["us_per_io"] = ios > 0 ? io_seconds / static_cast<double>(ios) * 1e6 : 0.0;
  state.counters["read_bytes"] = static_cast<double>(run_pages * bytes);
  label(state, store);
}

void read_size_args(benchmark::internal::Benchmark* b) {
  for (int depth : {1, 4}) {
    for (std::int64_t size : {16 << 10, 64 << 10, 256 << 10, 1 << 20, 2 << 20}) b->Args({size, depth});
  }
}

BENCHMARK(l2_write)->Name("BM_L2Write")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(l2_read)->Name("BM_L2Read")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(l2_read_size)->Name("BM_L2ReadSize")->Apply(read_size_args)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
