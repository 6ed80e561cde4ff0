// BM_L2Write: sustained segment writes of q4 pages (7B layer shape) through the L2 store, in
// its batches, with the I/O mode it picked (O_DIRECT where the filesystem takes it), a writer
// thread writing full batches while the caller fills the next, as the migrator does. Each
// iteration writes 64 MiB of pages and then frees them, so segments are created and deleted
// as in a long run. bytes_per_second counts device bytes.
// BM_L2Read: positional reads of random pages from 256 MiB of written segments, checksums
// verified. bytes_per_second counts page bytes returned.
// Files go to --l2-dir (default: the system temporary directory); the context records the
// filesystem and mode.
#include <benchmark/benchmark.h>

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

BENCHMARK(l2_write)->Name("BM_L2Write")->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(l2_read)->Name("BM_L2Read")->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
