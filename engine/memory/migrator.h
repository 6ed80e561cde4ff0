// The tiered pool's migrator: reader threads that load pages from L2 into L1 frames (demand
// loads before prefetches, each queue in order; `readers` of them, so that many reads are in
// flight at once, as a flash device's queue wants) and one writer thread that writes the store's
// full batches and compacts. Reads never queue behind writes: they run on their own threads.
// A reader takes, with the job it pops, the queued jobs of the same queue whose pages lie right
// after it in the same segment (up to max_read_bytes) and reads them with one I/O. It owns the
// threads, the two job queues and the lock and condition variables; the owner decides what to
// load and when (tiered_pool.h), the migrator only runs it.
//
// A page's load state (Load) lives in the owner's page record, at a stable address, and is
// shared with the migrator: it is read or written only under the migrator's lock - through the
// calls below, or lock() for the owner's scans. A Job's frame is written by the migrator while
// the load runs; the page's version is odd meanwhile. Before the owner reuses or frees a frame
// with a load in flight, it settles the load: settle() is the one cancel-or-wait path (a queued
// prefetch is cancelled, anything else waited for).
//
// Threading: the owner calls everything from one thread; writes_ready() may come from any
// thread (the store's writer wakeup). The read and write callbacks run on the migrator thread
// outside the lock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "memory/l2_store.h"

namespace kv {

// What the migrator runs outside its lock: calls down into the L2 store.
struct MigratorIo {
  std::function<void(L2Slot slot, std::byte* frame)> read;  // a page into a frame; throws InputError
  std::function<void()> write;  // the full batches to the device, then compaction
  // Optional: adjacent pages with one I/O (L2Store::read_run); per page an error, "" when read.
  std::function<std::vector<std::string>(const std::vector<L2Slot>& slots, const std::vector<std::byte*>& frames)> read_run;
};

class Migrator {
 public:
  // A page's load; under the migrator's lock.
  struct Load {
    enum class State : std::uint8_t { None, Queued, Running, Done, Failed };
    State state = State::None;
    std::string error;  // why a Failed load failed
    bool in_flight() const { return state == State::Queued || state == State::Running; }
  };
  struct Job {
    Load* load = nullptr;                           // the page's load record: the job's identity
    std::atomic<std::uint32_t>* version = nullptr;  // the page's version: odd while written
    L2Slot slot = kNoSlot;
    std::byte* frame = nullptr;
    // Where the page lay when queued (L2Store::location), to find neighbours to read with it;
    // segment kNoSegment: read alone. A hint: the store checks it again when it reads.
    L2Location where;
  };
  enum class LoadKind : std::uint8_t { Demand, Prefetch };

  // Starts `readers` reader threads and the writer thread; reads of adjacent pages are joined
  // up to max_read_bytes (with io.read_run). readers == 0: synchronous (L2Config::synchronous),
  // no threads at all: a load runs when it is queued and writes_ready() writes at once, both on
  // the calling thread.
  explicit Migrator(MigratorIo io, int readers = 1, std::size_t max_read_bytes = 0);
  ~Migrator();  // stop()
  Migrator(const Migrator&) = delete;
  Migrator& operator=(const Migrator&) = delete;

  // Queues a load (demand loads run before every prefetch); the job's load becomes Queued.
  void enqueue(const Job& job, LoadKind kind);
  // Leaves `load` with nothing in flight, before its frame is reused: a prefetch still queued
  // is cancelled, any other queued or running load waited for. The load is None after.
  void settle(Load& load);
  // A step needs the page: a prefetch still queued moves to the front of the demand queue, and
  // a load in flight is waited for. Returns the nanoseconds waited, nothing when none was in
  // flight. The load stays Done or Failed for consume().
  std::optional<std::uint64_t> wait(Load& load);
  // Marks a finished load seen (None); returns the error of a Failed one, "" otherwise.
  std::string consume(Load& load);
  // The store has a batch for the device (the store's writer wakeup).
  void writes_ready();
  // Drops the queued jobs, lets the running ones finish and joins the threads. Idempotent.
  void stop();
  // The lock under which the owner reads load states (scans of its page records).
  std::unique_lock<std::mutex> lock() { return std::unique_lock(mutex_); }

 private:
  void wait_idle(Load& load, std::unique_lock<std::mutex>& lock);
  // Pops the next job and the queued jobs of the same queue that continue it on the device.
  std::vector<Job> take_run();
  void run_reads(std::vector<Job>& run);
  void read_loop();
  void write_loop();

  MigratorIo io_;
  std::size_t max_read_bytes_;
  bool synchronous_;
  std::mutex mutex_;
  std::condition_variable work_, done_, write_work_;
  std::deque<Job> demand_, prefetch_;
  bool writes_ready_ = false;
  bool stop_ = false;
  std::vector<std::thread> readers_;  // last: start once the rest is built
  std::thread writer_;
};

}  // namespace kv
