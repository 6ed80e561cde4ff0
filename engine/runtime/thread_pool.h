// A fixed pool of worker threads for data-parallel loops. The calling thread takes part, so a
// pool of n threads runs n-1 workers. Work items are claimed dynamically, but callers write
// each item's result to its own slot and combine slots in index order, so results never
// depend on which thread ran what.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/work_clock.h"

namespace kv {

class ThreadPool {
 public:
  // Where start_background() runs its task: on the pool's background thread, or at once on the
  // calling thread (a serial engine: every instruction of its work on the thread that drives it).
  enum class Background : std::uint8_t { Thread, Inline };

  // threads == 0: one per hardware thread. More than runtime/thread_limit.h allows is an
  // InputError.
  explicit ThreadPool(int threads = 0, Background background = Background::Thread);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(i) for every i in [0, n) and returns when all calls have finished. Not reentrant:
  // fn must not call parallel_for on the same pool. The CPU time (and instructions) of the
  // items is accounted as engine work (runtime/work_clock.h); the waiting around them is not.
  void parallel_for(std::size_t n, const std::function<void(std::size_t)>& fn);

  // One task beside the loops, on the pool's background thread (started on first use): L0
  // staging copies the next batch of pages there while the kernels read this one. Its CPU time
  // is engine work, like an item's. One task at a time: a second start waits for the first.
  // Background::Inline: the task runs before this returns, and wait_background() rethrows what
  // it threw.
  void start_background(std::function<void()> task);
  // Waits for the background task, if any; rethrows what it threw.
  void wait_background();

  // Test only (a suite's test_slowdown): after each item, the thread that ran it does `share`
  // times that item's CPU time again as busy work, so a slowdown costs every thread CPU time.
  void set_work_inflation(double share) { inflation_.store(share, std::memory_order_relaxed); }

 private:
  void worker_loop(std::size_t index);
  // Runs items until none is left; returns the work they took on this thread.
  WorkStamp run_items(bool worker);

  void background_loop();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(std::size_t)>* job_ = nullptr;
  std::size_t job_size_ = 0;
  std::size_t next_item_ = 0;  // guarded by mutex_
  // Written under mutex_; atomic so that a waiting thread can poll them for a moment before it
  // sleeps (decode calls come back to back, and waking a sleeping thread costs tens of
  // microseconds on a VM).
  std::atomic<std::size_t> items_finished_{0};
  std::atomic<std::size_t> generation_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<double> inflation_{0.0};
  const Background background_mode_;
  bool poll_ = true;  // threads poll before they sleep: only when the pool fits the machine

  std::thread background_;
  std::mutex background_mutex_;
  std::condition_variable background_cv_;
  std::function<void()> background_task_;  // set: queued or running
  bool background_stop_ = false;
  std::exception_ptr background_error_;
};

}  // namespace kv
