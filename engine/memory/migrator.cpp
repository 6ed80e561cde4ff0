#include "memory/migrator.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "runtime/clock.h"
#include "runtime/error.h"

namespace kv {

Migrator::Migrator(MigratorIo io, int readers, std::size_t max_read_bytes) : io_(std::move(io)), max_read_bytes_(max_read_bytes) {
  KV_ASSERT(io_.read && io_.write, "the migrator needs a read and a write callback");
  KV_ASSERT(readers >= 1, "the migrator needs a reader thread");
  for (int i = 0; i < readers; ++i) readers_.emplace_back([this] { read_loop(); });
  writer_ = std::thread([this] { write_loop(); });
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
  write_work_.notify_one();
}

void Migrator::stop() {
  if (!writer_.joinable()) return;
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
  write_work_.notify_all();
  for (std::thread& reader : readers_) reader.join();
  writer_.join();
}

std::vector<Migrator::Job> Migrator::take_run() {
  // Under the lock, with a job queued.
  std::deque<Job>& queue = !demand_.empty() ? demand_ : prefetch_;
  std::vector<Job> run{queue.front()};
  queue.pop_front();
  if (io_.read_run && run.front().where.segment != kNoSegment) {
    // Extend the run with a queued page that starts where it ends, else one that ends where it
    // starts (within kMaxJoinGap), while the run stays within max_read_bytes.
    std::size_t bytes = run.front().where.bytes;
    const auto gap = [](const L2Location& a, const L2Location& b) -> std::uint64_t {  // b right after a, else max
      const std::uint64_t end = a.offset + a.bytes;
      return a.segment == b.segment && b.offset >= end && b.offset - end < kMaxJoinGap ? b.offset - end : UINT64_MAX;
    };
    for (bool grew = true; grew;) {
      grew = false;
      for (std::size_t i = 0; i < queue.size(); ++i) {
        const Job& next = queue[i];
        const std::uint64_t after = gap(run.back().where, next.where), before = gap(next.where, run.front().where);
        const std::uint64_t join = std::min(after, before);
        if (join == UINT64_MAX || bytes + join + next.where.bytes > max_read_bytes_) continue;
        bytes += join + next.where.bytes;
        if (after <= before) {
          run.push_back(next);
        } else {
          run.insert(run.begin(), next);
        }
        queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(i));
        grew = true;
        break;
      }
    }
  }
  for (const Job& job : run) job.load->state = Load::State::Running;
  return run;
}

void Migrator::run_reads(std::vector<Job>& run) {
  for (const Job& job : run) job.version->fetch_add(1, std::memory_order_acq_rel);  // odd: being written
  std::vector<std::string> errors(run.size());
  if (run.size() == 1) {
    try {
      io_.read(run.front().slot, run.front().frame);
    } catch (const InputError& e) {
      errors.front() = e.what();
    }
  } else {
    std::vector<L2Slot> slots;
    std::vector<std::byte*> frames;
    for (const Job& job : run) {
      slots.push_back(job.slot);
      frames.push_back(job.frame);
    }
    errors = io_.read_run(slots, frames);
  }
  for (const Job& job : run) job.version->fetch_add(1, std::memory_order_acq_rel);  // even: stable
  std::lock_guard lock(mutex_);
  for (std::size_t i = 0; i < run.size(); ++i) {
    run[i].load->state = errors[i].empty() ? Load::State::Done : Load::State::Failed;
    run[i].load->error = std::move(errors[i]);
  }
  done_.notify_all();
}

void Migrator::read_loop() {
  for (;;) {
    std::vector<Job> run;
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return stop_ || !demand_.empty() || !prefetch_.empty(); });
      if (stop_) return;
      run = take_run();
    }
    run_reads(run);
  }
}

void Migrator::write_loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      write_work_.wait(lock, [&] { return stop_ || writes_ready_; });
      if (stop_) return;
      writes_ready_ = false;
    }
    io_.write();
  }
}

}  // namespace kv
