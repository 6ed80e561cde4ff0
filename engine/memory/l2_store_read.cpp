// L2Store's reads: one page, or a run of pages joined into one I/O where their slots are
// adjacent, each verified against its checksum; a failed or corrupt read names the segment
// file and the page (l2_store.h).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "memory/l2_store.h"
#include "memory/l2_store_records.h"
#include "runtime/clock.h"
#include "runtime/error.h"

namespace kv {

void L2Store::read_error(const Slot& slot, L2Slot id, const std::string& reason) const {
  const std::string file = slot.segment < segments_.size() && segments_[slot.segment] ? segments_[slot.segment]->path
                                                                                       : path_ + "/seg-" + std::to_string(slot.segment);
  throw InputError(file, "page " + std::to_string(id) + " at offset " + std::to_string(slot.offset), reason);
}

L2Store::SpanRead L2Store::device_read(Segment& segment, std::unique_lock<std::mutex>& lock, std::uint64_t from, std::uint64_t to) {
  ++segment.reads_in_flight;
  const int fd = segment.fd;
  begin_device_read();
  lock.unlock();
  thread_local AlignedBuffer bounce;
  std::size_t begin = from, length = to - from;
  if (mode_ == L2Mode::Direct) {
    begin = align_down(from);
    length = align_up(to) - begin;
  }
  bounce.reserve(length);
  std::size_t done = 0;
  ssize_t n = 0;
  while (done < length) {
    n = io_->pread(fd, bounce.data.get() + done, length - done, static_cast<off_t>(begin + done));
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  lock.lock();
  end_device_read();
  --segment.reads_in_flight;
  stats_.device_bytes_read += done;
  ++stats_.read_ios;
  return {begin, done, n, bounce.data.get()};
}

void L2Store::begin_device_read() {
  if (reads_active_++ == 0) read_busy_since_ = monotonic_ns();
}

void L2Store::end_device_read() {
  if (--reads_active_ == 0) stats_.read_ns += monotonic_ns() - read_busy_since_;
}

std::string L2Store::read_error_text(const Slot& slot, L2Slot id, const std::string& reason) const {
  try {
    read_error(slot, id, reason);
  } catch (const InputError& e) {
    return e.what();
  }
}

L2Location L2Store::location(L2Slot id) const {
  std::lock_guard lock(mutex_);
  KV_ASSERT(id < slots_.size(), "unknown L2 slot");
  const Slot& slot = slots_[id];
  if (!slot.live || slot.batch != nullptr) return {};
  return {slot.segment, slot.offset, slot.bytes};
}

std::vector<std::string> L2Store::read_run(const std::vector<L2Slot>& ids, const std::vector<std::byte*>& dsts) {
  KV_ASSERT(ids.size() == dsts.size() && !ids.empty(), "read_run takes a frame per slot");
  std::vector<std::string> errors(ids.size());
  const auto one_by_one = [&] {
    for (std::size_t i = 0; i < ids.size(); ++i) {
      try {
        read(ids[i], dsts[i]);
      } catch (const InputError& e) {
        errors[i] = e.what();
      }
    }
    return errors;
  };
  if (ids.size() == 1) return one_by_one();
  std::unique_lock lock(mutex_);
  std::vector<Slot> run;
  run.reserve(ids.size());
  for (L2Slot id : ids) {
    KV_ASSERT(id < slots_.size() && slots_[id].live, "read of a dead L2 slot");
    const Slot& slot = slots_[id];
    const bool follows = run.empty() || (slot.segment == run.front().segment && slot.offset >= run.back().offset + run.back().bytes &&
                                         slot.offset - (run.back().offset + run.back().bytes) < kMaxJoinGap);
    if (slot.batch != nullptr || !follows) {
      lock.unlock();
      return one_by_one();
    }
    run.push_back(slot);
  }
  const SpanRead span = device_read(*segments_[run.front().segment], lock, run.front().offset, run.back().offset + run.back().bytes);
  const std::size_t begin = span.begin, done = span.done;
  const ssize_t n = span.last;
  for (std::size_t i = 0; i < run.size(); ++i) {
    const Slot& slot = run[i];
    const std::size_t needed = slot.offset - begin + slot.bytes;
    if (done < needed) {
      errors[i] = read_error_text(slot, ids[i], n < 0 ? std::string("read failed: ") + std::strerror(static_cast<int>(-n))
                                                      : "truncated: the file ends " + std::to_string(needed - done) +
                                                            " bytes before the page does");
      continue;
    }
    std::memcpy(dsts[i], span.data + (slot.offset - begin), slot.bytes);
    ++stats_.pages_read;
    stats_.page_bytes_read += slot.bytes;
  }
  retire_segment_if_dead(run.front().segment);
  lock.unlock();
  for (std::size_t i = 0; i < run.size(); ++i) {
    if (!errors[i].empty() || XXH3_64bits(dsts[i], run[i].bytes) == run[i].checksum) continue;
    lock.lock();
    errors[i] = read_error_text(run[i], ids[i], "checksum mismatch (xxh3): the segment is corrupt");
    lock.unlock();
  }
  return errors;
}

void L2Store::read(L2Slot id, std::byte* dst) {
  std::unique_lock lock(mutex_);
  KV_ASSERT(id < slots_.size() && slots_[id].live, "read of a dead L2 slot");
  const Slot slot = slots_[id];
  if (slot.batch != nullptr) {  // still in memory
    std::memcpy(dst, slot.batch->buffer.data.get() + (slot.offset - slot.batch->file_offset), slot.bytes);
    ++stats_.reads_from_buffer;
  } else {
    const SpanRead span = device_read(*segments_[slot.segment], lock, slot.offset, slot.offset + slot.bytes);
    const std::size_t begin = span.begin, done = span.done;
    const ssize_t n = span.last;
    const std::size_t needed = slot.offset - begin + slot.bytes;
    if (done < needed) {
      const std::string reason = n < 0 ? std::string("read failed: ") + std::strerror(static_cast<int>(-n))
                                       : "truncated: the file ends " + std::to_string(needed - done) + " bytes before the page does";
      retire_segment_if_dead(slot.segment);
      read_error(slot, id, reason);
    }
    std::memcpy(dst, span.data + (slot.offset - begin), slot.bytes);
    retire_segment_if_dead(slot.segment);
  }
  ++stats_.pages_read;
  stats_.page_bytes_read += slot.bytes;
  lock.unlock();
  if (XXH3_64bits(dst, slot.bytes) != slot.checksum) {
    lock.lock();
    read_error(slot, id, "checksum mismatch (xxh3): the segment is corrupt");
  }
}

}  // namespace kv
