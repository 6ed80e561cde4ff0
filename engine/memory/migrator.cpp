#include "memory/migrator.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <utility>
#include <vector>

#include "runtime/clock.h"
#include "runtime/error.h"

namespace kv {

Migrator::Migrator(MigratorIo io, int readers, std::size_t max_read_bytes)
    : io_(std::move(io)), max_read_bytes_(max_read_bytes), synchronous_(readers == 0) {
  KV_ASSERT(io_.read && io_.write, "the migrator needs a read and a write callback");
  KV_ASSERT(readers >= 0, "the migrator's reader threads: 0 (synchronous) or more");
  if (synchronous_) return;
  for (int i = 0; i < readers; ++i) readers_.emplace_back([this] { read_loop(); });
  writer_ = std::thread([this] { write_loop(); });
}

Migrator::~Migrator() { stop(); }

void Migrator::enqueue(const Job& job, LoadKind kind) {
  KV_ASSERT(job.load != nullptr && job.version != nullptr, "a load job names its page's load and version");
  if (synchronous_) {
    {
      std::lock_guard lock(mutex_);
      job.load->state = Load::State::Running;
      job.load->error.clear();
    }
    std::vector<Job> run{job};
    run_reads(run);
    return;
  }
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
  if (synchronous_) {
    io_.write();
    return;
  }
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
    // One pass over the queue (under the lock: no rescans per joined page) for the jobs near
    // the first one in its segment; the run then grows through them, sorted by offset, at
    // either end, each gap under kMaxJoinGap, while it stays within max_read_bytes.
    const L2Location first = run.front().where;
    struct Near {
      std::uint64_t offset, bytes;
      std::size_t index;
    };
    std::vector<Near> near;
    for (std::size_t i = 0; i < queue.size(); ++i) {
      const L2Location& w = queue[i].where;
      if (w.segment != first.segment || w.offset + max_read_bytes_ < first.offset || w.offset > first.offset + max_read_bytes_) continue;
      near.push_back({w.offset, w.bytes, i});
    }
    if (!near.empty()) {
      std::sort(near.begin(), near.end(), [](const Near& a, const Near& b) { return a.offset < b.offset; });
      std::uint64_t begin = first.offset, end = first.offset + first.bytes, bytes = first.bytes;
      std::vector<std::size_t> after, before;  // queue indices, outwards from the first job
      const auto split = std::lower_bound(near.begin(), near.end(), end, [](const Near& n, std::uint64_t at) { return n.offset < at; });
      auto next = split;                               // the next page after the run's end
      auto previous = std::make_reverse_iterator(split);  // the next page before its start
      // A page queued twice, or overlapping the first one, is left for a later run.
      while (previous != near.rend() && previous->offset + previous->bytes > begin) ++previous;
      for (;;) {
        // Of the two pages that could extend the run, the one queued first joins (queue order
        // is the order the pages are wanted in).
        const auto joins = [&](std::uint64_t gap, std::uint64_t page) { return gap < kMaxJoinGap && bytes + gap + page <= max_read_bytes_; };
        const bool forward = next != near.end() && next->offset >= end && joins(next->offset - end, next->bytes);
        const bool backward = previous != near.rend() && joins(begin - (previous->offset + previous->bytes), previous->bytes);
        if (forward && (!backward || next->index < previous->index)) {
          bytes += next->offset - end + next->bytes;
          end = next->offset + next->bytes;
          after.push_back(next->index);
          ++next;
        } else if (backward) {
          bytes += begin - (previous->offset + previous->bytes) + previous->bytes;
          begin = previous->offset;
          before.push_back(previous->index);
          ++previous;
        } else {
          break;
        }
      }
      if (!after.empty() || !before.empty()) {
        std::vector<Job> joined;
        joined.reserve(before.size() + 1 + after.size());
        for (auto it = before.rbegin(); it != before.rend(); ++it) joined.push_back(queue[*it]);
        joined.push_back(run.front());
        for (std::size_t i : after) joined.push_back(queue[i]);
        std::vector<bool> taken(queue.size(), false);
        for (std::size_t i : after) taken[i] = true;
        for (std::size_t i : before) taken[i] = true;
        std::size_t kept = 0;
        for (std::size_t i = 0; i < queue.size(); ++i) {
          if (!taken[i]) queue[kept++] = queue[i];
        }
        queue.resize(kept);
        run = std::move(joined);
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
