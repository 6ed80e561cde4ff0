#include "runtime/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "runtime/error.h"
#include "runtime/thread_limit.h"

namespace kv {

ThreadPool::ThreadPool(int threads, Background background) : background_mode_(background) {
  // The commands and the suite check their counts first, naming their own field; this is the
  // last line for any other caller.
  check_thread_count(threads, "ThreadPool", "threads");
  const int total = threads == 0 ? std::min(hardware_threads(), max_pool_threads()) : threads;
  poll_ = total <= hardware_threads();
  workers_.reserve(static_cast<std::size_t>(total - 1));
  for (int i = 1; i < total; ++i) workers_.emplace_back([this, i] { worker_loop(static_cast<std::size_t>(i)); });
}

ThreadPool::~ThreadPool() {
  if (background_.joinable()) {
    {
      std::lock_guard lock(background_mutex_);
      background_stop_ = true;
    }
    background_cv_.notify_all();
    background_.join();
  }
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (auto& worker : workers_) worker.join();
}

WorkStamp ThreadPool::run_items(bool worker) {
  // Items are claimed one at a time under the lock: the loops we run have few, coarse items
  // (pages, heads), so the lock is cheap next to the work.
  WorkStamp total;
  const double inflation = inflation_.load(std::memory_order_relaxed);
  std::unique_lock lock(mutex_);
  while (next_item_ < job_size_) {
    std::size_t item = next_item_++;
    const auto* job = job_;
    lock.unlock();
    const WorkStamp start = thread_work();
    (*job)(item);
    if (inflation > 0.0) burn_cpu_ns(static_cast<std::uint64_t>(static_cast<double>(thread_cpu_ns() - start.cpu_ns) * inflation));
    const WorkStamp work = thread_work() - start;
    // A worker's work is accounted before the item counts as finished, so that the caller,
    // once parallel_for returns, sees all of it.
    if (worker) work_account::add_worker_work(work);
    total.cpu_ns += work.cpu_ns;
    total.instructions += work.instructions;
    lock.lock();
    if (++items_finished_ == job_size_) work_done_.notify_all();
  }
  return total;
}

namespace {

// How long a thread polls before it sleeps on a condition variable. A decode step's serial
// stretches (page views, plan, page masses) last 50-100 us at 32K; with 50 us the worker slept
// through them and every parallel loop paid a wake-up (a tenth of a sparse step here).
constexpr auto kSpin = std::chrono::microseconds(200);

// Polls `ready` until it holds or kSpin has passed; true if it held. A pool with more threads
// than the machine has does not poll: its pollers would hold the cores the working threads
// need (on 2 cores, 4 polling threads made a scoring run 14 times slower than one thread).
template <typename Ready>
bool spin_until(bool poll, Ready ready) {
  if (!poll) return ready();
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return false;
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
  }
}

}  // namespace

void ThreadPool::worker_loop(std::size_t index) {
  std::size_t seen_generation = 0;
  for (;;) {
    spin_until(poll_, [&] { return stopping_.load() || generation_.load() != seen_generation; });
    std::size_t items = 0;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_.load() || generation_.load() != seen_generation; });
      if (stopping_) return;
      seen_generation = generation_.load();
      items = job_size_;
    }
    // No more threads than the loop has items: the caller takes one, workers 1..items-1 the
    // rest; the others wait for the next loop.
    if (index < items) run_items(true);
  }
}

void ThreadPool::parallel_for(std::size_t n, const std::function<void(std::size_t)>& fn) {
  if (n == 0) return;
  const double inflation = inflation_.load(std::memory_order_relaxed);
  if ((workers_.empty() || n == 1) && inflation == 0.0) {
    for (std::size_t i = 0; i < n; ++i) fn(i);
    return;
  }
  const WorkStamp entered = thread_work();
  {
    std::lock_guard lock(mutex_);
    job_ = &fn;
    job_size_ = n;
    next_item_ = 0;
    items_finished_ = 0;
    generation_.fetch_add(1);
  }
  work_ready_.notify_all();
  const WorkStamp own_items = run_items(false);
  spin_until(poll_, [&] { return items_finished_.load() == n; });
  {
    std::unique_lock lock(mutex_);
    work_done_.wait(lock, [&] { return items_finished_.load() == job_size_; });
    job_ = nullptr;
    job_size_ = 0;
  }
  const WorkStamp inside = thread_work() - entered;
  work_account::add_caller_time(inside, inside - own_items);
}

void ThreadPool::start_background(std::function<void()> task) {
  wait_background();
  if (background_mode_ == Background::Inline) {
    try {
      task();
    } catch (...) {
      std::lock_guard lock(background_mutex_);
      background_error_ = std::current_exception();
    }
    return;
  }
  std::lock_guard lock(background_mutex_);
  if (!background_.joinable()) background_ = std::thread([this] { background_loop(); });
  background_task_ = std::move(task);
  background_cv_.notify_all();
}

void ThreadPool::wait_background() {
  std::unique_lock lock(background_mutex_);
  background_cv_.wait(lock, [&] { return !background_task_; });
  if (background_error_) std::rethrow_exception(std::exchange(background_error_, nullptr));
}

void ThreadPool::background_loop() {
  std::unique_lock lock(background_mutex_);
  for (;;) {
    background_cv_.wait(lock, [&] { return background_stop_ || background_task_; });
    if (!background_task_) return;  // stopping, with nothing left to run
    lock.unlock();
    const WorkStamp start = thread_work();
    std::exception_ptr error;
    try {
      background_task_();
    } catch (...) {
      error = std::current_exception();
    }
    // Accounted before the task counts as finished, so a waiter sees all of it.
    work_account::add_worker_work(thread_work() - start);
    lock.lock();
    background_error_ = error;
    background_task_ = nullptr;
    background_cv_.notify_all();
  }
}

}  // namespace kv
