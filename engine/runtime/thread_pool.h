// A fixed pool of worker threads for data-parallel loops. The calling thread takes part, so a
// pool of n threads runs n-1 workers. Work items are claimed dynamically, but callers write
// each item's result to its own slot and combine slots in index order, so results never
// depend on which thread ran what.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kv {

class ThreadPool {
 public:
  // threads == 0: one per hardware thread.
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(i) for every i in [0, n) and returns when all calls have finished. Not reentrant:
  // fn must not call parallel_for on the same pool.
  void parallel_for(std::size_t n, const std::function<void(std::size_t)>& fn);

 private:
  void worker_loop();
  void run_items();

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
};

}  // namespace kv
