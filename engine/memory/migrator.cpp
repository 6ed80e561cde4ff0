#include "memory/migrator.h"

#include <utility>

#include "runtime/clock.h"
#include "runtime/error.h"

namespace kv {

Migrator::Migrator(MigratorIo io) : io_(std::move(io)) {
  KV_ASSERT(io_.read && io_.write, "the migrator needs a read and a write callback");
  thread_ = std::thread([this] { run(); });
}

Migrator::~Migrator() { stop(); }

void Migrator::enqueue(const Job& job, LoadKind kind) {
  KV_ASSERT(job.load != nullptr && job.version != nullptr, "a load job names its page's load and version");
  std::lock_guard lock(mutex_);
  KV_ASSERT(!stop_, "enqueue on a stopped migrator");
  job.load->state = Load::State::Queued;
  job.load->error.clear();
  (kind == LoadKind::Demand ? demand_ : prefetch_).push_back(job);
  work_.notify_one();
}

void Migrator::wait_idle(Load& load, std::unique_lock<std::mutex>& lock) {
  done_.wait(lock, [&] { return !load.in_flight(); });
}

void Migrator::settle(Load& load) {
  std::unique_lock lock(mutex_);
  for (auto it = prefetch_.begin(); it != prefetch_.end(); ++it) {
    if (it->load == &load) {
      prefetch_.erase(it);
      load.state = Load::State::None;
      break;
    }
  }
  wait_idle(load, lock);  // a demand load or a running one: its frame is in use until it ends
  load.state = Load::State::None;
  load.error.clear();
}

std::optional<std::uint64_t> Migrator::wait(Load& load) {
  std::unique_lock lock(mutex_);
  if (load.state == Load::State::Queued) {
    for (auto it = prefetch_.begin(); it != prefetch_.end(); ++it) {
      if (it->load == &load) {
        demand_.push_front(*it);
        prefetch_.erase(it);
        work_.notify_one();
        break;
      }
    }
  }
  if (!load.in_flight()) return std::nullopt;
  const std::uint64_t start = monotonic_ns();
  wait_idle(load, lock);
  return monotonic_ns() - start;
}

std::string Migrator::consume(Load& load) {
  std::lock_guard lock(mutex_);
  std::string error = load.state == Load::State::Failed ? std::move(load.error) : std::string();
  load.state = Load::State::None;
  load.error.clear();
  return error;
}

void Migrator::writes_ready() {
  std::lock_guard lock(mutex_);
  writes_ready_ = true;
  work_.notify_one();
}

void Migrator::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
    // Dropped jobs never run: their loads are None, so a later settle() does not wait.
    for (const Job& job : demand_) job.load->state = Load::State::None;
    for (const Job& job : prefetch_) job.load->state = Load::State::None;
    demand_.clear();
    prefetch_.clear();
  }
  work_.notify_all();
  thread_.join();
}

void Migrator::run() {
  for (;;) {
    Job job;
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return stop_ || !demand_.empty() || !prefetch_.empty() || writes_ready_; });
      if (stop_) return;
      std::deque<Job>& queue = !demand_.empty() ? demand_ : prefetch_;
      if (!queue.empty()) {
        job = queue.front();
        queue.pop_front();
        job.load->state = Load::State::Running;
      } else {
        writes_ready_ = false;
      }
    }
    if (job.load == nullptr) {  // no load waits: the store's writes
      io_.write();
      continue;
    }
    job.version->fetch_add(1, std::memory_order_acq_rel);  // odd: being written
    std::string error;
    try {
      io_.read(job.slot, job.frame);
    } catch (const InputError& e) {
      error = e.what();
    }
    job.version->fetch_add(1, std::memory_order_acq_rel);  // even: stable
    std::lock_guard lock(mutex_);
    job.load->state = error.empty() ? Load::State::Done : Load::State::Failed;
    job.load->error = std::move(error);
    done_.notify_all();
  }
}

}  // namespace kv
