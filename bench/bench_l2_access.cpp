// The L2 store's device access as calibrate prices it: sequential appends flushed to the
// device, pages read back in order or at random, and random 4 KiB reads of a plain file.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.h"
#include "kernel_benchmarks.h"
#include "memory/file_io.h"
#include "memory/l2_store.h"
#include "runtime/error.h"

namespace kvbench::micro {

namespace {

void label(benchmark::State& state, const kv::L2Store& store) {
  state.SetLabel(std::string(kv::l2_mode_name(store.mode())) + " on " + store.fs_type() + (store.on_ram() ? " (RAM, not flash!)" : ""));
}

std::vector<kv::L2Slot> append_pages(kv::L2Store& store, const std::vector<std::byte>& page, std::size_t count) {
  std::vector<kv::L2Slot> slots;
  slots.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    slots.push_back(store.append(page.data(), page.size()));
    if (slots.back() == kv::kNoSlot) throw kv::InputError(store.path(), "L2 store", "refused a page: " + store.failure());
  }
  if (!store.write_pending(true)) throw kv::InputError(store.path(), "L2 store", "a write failed: " + store.failure());
  return slots;
}

// Appends and flushes one write batch of pages after another, releasing each once it is on the
// device, until stopped: the store's owner thread, the benchmark's thread only reads.
class BackgroundWriter {
 public:
  BackgroundWriter(kv::L2Store& store, const std::vector<std::byte>& page, std::size_t batch_bytes)
      : thread_([this, &store, &page, batch_bytes] {
          const std::size_t pages = std::max<std::size_t>(1, batch_bytes / page.size());
          try {
            while (!stop_.load(std::memory_order_relaxed)) {
              for (kv::L2Slot slot : append_pages(store, page, pages)) store.release(slot);
            }
          } catch (const std::exception& error) {  // reported by stop(), on the benchmark's thread
            failure_ = error.what();
          }
        }) {}
  ~BackgroundWriter() { stop(); }
  BackgroundWriter(const BackgroundWriter&) = delete;
  BackgroundWriter& operator=(const BackgroundWriter&) = delete;
  // Joins the thread; the first failure the writer met, "" when none.
  std::string stop() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
    return failure_;
  }

 private:
  std::atomic<bool> stop_{false};
  std::string failure_;
  std::thread thread_;
};

}  // namespace

void l2_benchmark(benchmark::State& state, const std::string& dir, L2Access access, std::size_t page_bytes, std::size_t total) {
  kv::L2Config config;
  config.dir = dir;
  std::unique_ptr<kv::L2Store> opened;
  try {
    opened = std::make_unique<kv::L2Store>(config);
  } catch (const kv::InputError& error) {
    state.SkipWithError(error.what());
    return;
  }
  kv::L2Store& store = *opened;
  std::vector<std::byte> page(page_bytes);
  const auto noise = bench_values(page_bytes / sizeof(float) + 1, 21, false);
  std::memcpy(page.data(), noise.data(), page_bytes);
  const std::size_t pages = total / page_bytes;
  std::vector<kv::L2Slot> slots;
  try {
    if (access != L2Access::Write) slots = append_pages(store, page, pages);
    std::vector<std::byte> out(page_bytes);
    std::mt19937 rng(7);
    std::uniform_int_distribution<std::size_t> pick(0, pages - 1);
    constexpr int kRandomReads = 64;  // per iteration
    std::size_t bytes = 0;
    std::unique_ptr<BackgroundWriter> writer;
    if (access == L2Access::ReadRandomUnderWrites) writer = std::make_unique<BackgroundWriter>(store, page, config.batch_bytes);
    for (auto _ : state) {
      switch (access) {
        case L2Access::Write:
          slots = append_pages(store, page, pages);
          state.PauseTiming();
          for (kv::L2Slot slot : slots) store.release(slot);
          state.ResumeTiming();
          bytes += pages * page_bytes;
          break;
        case L2Access::ReadInOrder:
          for (kv::L2Slot slot : slots) store.read(slot, out.data());
          bytes += pages * page_bytes;
          break;
        case L2Access::ReadRandom:
        case L2Access::ReadRandomUnderWrites:
          for (int i = 0; i < kRandomReads; ++i) store.read(slots[pick(rng)], out.data());
          bytes += kRandomReads * page_bytes;
          break;
      }
    }
    if (writer) {
      if (const std::string failure = writer->stop(); !failure.empty()) throw kv::InputError(store.path(), "L2 store", failure);
    }
    state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
    if (access == L2Access::ReadRandom || access == L2Access::ReadRandomUnderWrites) {
      state.counters["us_per_page"] = benchmark::Counter(static_cast<double>(state.iterations()) * kRandomReads * 1e-6,
                                                         benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
    }
  } catch (const kv::InputError& error) {
    state.SkipWithError(error.what());
    return;
  }
  label(state, store);
}

void l2_4k_read_benchmark(benchmark::State& state, const std::string& dir, std::size_t bytes) {
  kv::FileIo& io = kv::posix_file_io();
  const std::string file = dir + "/kvbench-random-4k-" + std::to_string(::getpid());
  struct Cleanup {
    kv::FileIo& io;
    std::string path;
    int fd = -1;
    ~Cleanup() {
      if (fd >= 0) io.close(fd);
      io.unlink(path);
    }
  } cleanup{io, file};
  {
    const int fd = io.open(file, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0) {
      state.SkipWithError((file + ": " + std::strerror(-fd)).c_str());
      return;
    }
    cleanup.fd = fd;
    std::vector<char> block(1 << 20, 'x');
    for (std::size_t off = 0; off < bytes; off += block.size()) {
      if (io.pwrite(fd, block.data(), block.size(), static_cast<off_t>(off)) != static_cast<ssize_t>(block.size())) {
        state.SkipWithError((file + ": a write failed").c_str());
        return;
      }
    }
    io.fdatasync(fd);
    io.drop_cache(fd, 0, static_cast<off_t>(bytes));
    io.close(fd);
    cleanup.fd = -1;
  }
  // Past the page cache, as the store reads: O_DIRECT where the filesystem takes it.
  cleanup.fd = io.open(file, O_RDONLY | O_DIRECT, 0);
  const bool direct = cleanup.fd >= 0;
  if (!direct) cleanup.fd = io.open(file, O_RDONLY, 0);
  if (cleanup.fd < 0) {
    state.SkipWithError((file + ": " + std::strerror(-cleanup.fd)).c_str());
    return;
  }
  void* raw = nullptr;
  if (posix_memalign(&raw, 4096, 4096) != 0) throw std::bad_alloc();
  const std::unique_ptr<void, decltype(&std::free)> buffer(raw, &std::free);
  std::mt19937 rng(17);
  std::uniform_int_distribution<std::size_t> pick(0, bytes / 4096 - 1);
  constexpr int kReads = 64;  // per iteration
  for (auto _ : state) {
    for (int i = 0; i < kReads; ++i) {
      if (io.pread(cleanup.fd, buffer.get(), 4096, static_cast<off_t>(pick(rng) * 4096)) != 4096) {
        state.SkipWithError((file + ": a read failed").c_str());
        return;
      }
    }
  }
  state.counters["reads_per_second"] = benchmark::Counter(static_cast<double>(state.iterations()) * kReads, benchmark::Counter::kIsRate);
  state.SetLabel(direct ? "O_DIRECT" : "buffered (drop_cache first)");
}

}  // namespace kvbench::micro
