#include "memory/l2_store.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "memory/l2_store_records.h"
#include "runtime/clock.h"
#include "runtime/error.h"

namespace kv {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDirPrefix = "kvbench-l2-";


std::string filesystem_name(long type) {
  switch (static_cast<unsigned long>(type)) {
    case 0x01021994ul: return "tmpfs";
    case 0x858458f6ul: return "ramfs";
    case 0xEF53ul: return "ext4";
    case 0x58465342ul: return "xfs";
    case 0x9123683Eul: return "btrfs";
    case 0xF2F52010ul: return "f2fs";
    case 0x794c7630ul: return "overlayfs";
    case 0x6969ul: return "nfs";
    case 0x2fc12fc1ul: return "zfs";
    case 0x65735546ul: return "fuse";
    default: {
      char hex[32];
      std::snprintf(hex, sizeof hex, "0x%lx", static_cast<unsigned long>(type));
      return std::string("unknown(") + hex + ")";
    }
  }
}

// A directory of a store whose process is gone: its lock file can be locked (or it has none
// and the pid in its name is not running).
bool is_stale(const fs::path& dir) {
  const fs::path lock = dir / "lock";
  const int fd = ::open(lock.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    const std::string name = dir.filename().string();
    const long pid = std::strtol(name.c_str() + std::strlen(kDirPrefix), nullptr, 10);
    return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
  }
  const bool free = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return free;
}

void clean_stale_directories(const fs::path& parent) {
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(parent, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kDirPrefix, 0) != 0 || !entry.is_directory(ec)) continue;
    if (is_stale(entry.path())) fs::remove_all(entry.path(), ec);
  }
}

}  // namespace

std::string filesystem_type(const std::string& path) {
  struct statfs info {};
  return ::statfs(path.c_str(), &info) == 0 ? filesystem_name(static_cast<long>(info.f_type)) : "unknown";
}

const char* l2_mode_name(L2Mode mode) { return mode == L2Mode::Direct ? "o_direct" : "buffered+fdatasync"; }

void validate_l2_config(const L2Config& config) {
  const std::string where = "l2 config";
  if (config.dir.empty()) throw InputError(where, "l2_dir", "is empty");
  if (config.segment_bytes < kMinSegmentBytes || config.segment_bytes % kL2Align != 0) {
    throw InputError(where, "l2_segment_bytes", std::to_string(config.segment_bytes) + " must be >= 4 MiB and a multiple of 4 KiB");
  }
  if (config.batch_bytes < kL2Align || config.batch_bytes % kL2Align != 0 || config.batch_bytes > config.segment_bytes) {
    throw InputError(where, "l2_batch_bytes",
                     std::to_string(config.batch_bytes) + " must be a multiple of 4 KiB and at most the segment size");
  }
  if (config.write_buffers < 2) throw InputError(where, "l2_write_buffers", "must be >= 2 (one fills while one is written)");
  if (!(config.compact_dead_ratio > 0.0 && config.compact_dead_ratio <= 1.0)) {
    throw InputError(where, "l2_compact_dead_ratio", "must be in (0, 1]");
  }
  if (config.queue_depth < 1 || config.queue_depth > 64) throw InputError(where, "l2_queue_depth", "must be in 1..64");
  if (config.max_read_bytes < kL2Align) throw InputError(where, "l2_max_read_bytes", "must be at least 4 KiB");
  if (!(config.overprovision >= 0.0 && config.overprovision <= 0.9)) throw InputError(where, "l2_overprovision", "must be in [0, 0.9]");
}

L2Store::L2Store(const L2Config& config) : config_(config), io_(config.io != nullptr ? config.io : &posix_file_io()) {
  validate_l2_config(config_);
  std::error_code ec;
  const fs::path parent(config_.dir);
  const fs::file_status status = fs::status(parent, ec);
  if (!fs::exists(status)) throw InputError(config_.dir, "l2_dir", "does not exist");
  if (!fs::is_directory(status)) throw InputError(config_.dir, "l2_dir", "is not a directory");
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    throw InputError(config_.dir, "l2_dir", std::string("is not writable: ") + std::strerror(errno));
  }
  clean_stale_directories(parent);
  static std::atomic<int> counter{0};
  // The pid zero-padded: a store's paths have one length whatever the pid, so naming a segment
  // is the same work in every process (the sim clock counts it).
  std::string pid = std::to_string(::getpid());
  pid.insert(0, pid.size() < 10 ? 10 - pid.size() : 0, '0');
  for (;;) {
    const fs::path own = parent / (kDirPrefix + pid + "-" + std::to_string(counter++));
    if (::mkdir(own.c_str(), 0700) == 0) {
      path_ = own.string();
      break;
    }
    if (errno != EEXIST) throw InputError(config_.dir, "l2_dir", std::string("cannot create the store's directory: ") + std::strerror(errno));
  }
  lock_fd_ = ::open((path_ + "/lock").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  if (lock_fd_ < 0 || ::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    const std::string reason = std::strerror(errno);
    fs::remove_all(path_, ec);
    throw InputError(config_.dir, "l2_dir", "cannot lock the store's directory: " + reason);
  }
  fs_type_ = filesystem_type(path_);
  on_ram_ = fs_type_ == "tmpfs" || fs_type_ == "ramfs";
  if (config_.direct_io) {  // O_DIRECT works when an aligned write through it does
    const std::string probe = path_ + "/probe";
    const int fd = io_->open(probe, O_CREAT | O_RDWR | O_TRUNC | O_DIRECT, 0600);
    if (fd >= 0) {
      AlignedBuffer block;
      block.reserve(kL2Align);
      std::memset(block.data.get(), 0, kL2Align);
      if (io_->pwrite(fd, block.data.get(), kL2Align, 0) == static_cast<ssize_t>(kL2Align)) mode_ = L2Mode::Direct;
      io_->close(fd);
    }
    io_->unlink(probe);
  }
}

L2Store::~L2Store() {
  for (auto& segment : segments_) {
    if (segment && segment->fd >= 0) io_->close(segment->fd);
  }
  std::error_code ec;
  fs::remove_all(path_, ec);
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

void L2Store::set_writer_wakeup(std::function<void()> wakeup) {
  std::lock_guard lock(mutex_);
  writer_wakeup_ = std::move(wakeup);
}

bool L2Store::open_segment(std::unique_lock<std::mutex>& lock) {
  (void)lock;
  auto segment = std::make_unique<Segment>();
  segment->path = path_ + "/seg-" + std::to_string(segments_.size()) + ".kvl2";
  const int flags = O_CREAT | O_RDWR | O_TRUNC | (mode_ == L2Mode::Direct ? O_DIRECT : 0);
  segment->fd = io_->open(segment->path, flags, 0600);
  if (segment->fd < 0) {
    failed_ = true;
    failure_ = segment->path + ": cannot create the segment: " + strerrorname_np(-segment->fd) + " (" +
               std::strerror(-segment->fd) + ")";
    return false;
  }
  current_segment_ = static_cast<std::uint32_t>(segments_.size());
  segments_.push_back(std::move(segment));
  ++stats_.segments_created;
  return true;
}

std::uint64_t L2Store::append_limit() const {
  if (config_.max_bytes == 0) return 0;
  return static_cast<std::uint64_t>(static_cast<double>(config_.max_bytes) * (1.0 - config_.overprovision));
}

L2Store::Batch* L2Store::writable_batch(std::size_t bytes, std::unique_lock<std::mutex>& lock, bool wait, bool relocation) {
  const std::uint64_t start = monotonic_ns();
  bool waited = false;
  for (;;) {  // re-evaluated after every wait: the other thread may have moved things on
    if (filling_ != nullptr && filling_->used + bytes <= filling_->capacity) break;
    if (filling_ != nullptr) {  // full: hand it to the writer
      filling_->state = Batch::State::Full;
      full_.push_back(filling_);
      filling_ = nullptr;
      if (writer_wakeup_) writer_wakeup_();
    }
    Segment* segment = current_segment_ < segments_.size() ? segments_[current_segment_].get() : nullptr;
    if (segment == nullptr || segment->used + align_up(bytes) > config_.segment_bytes) {
      const std::uint32_t previous = current_segment_;
      if (!open_segment(lock)) return nullptr;
      if (previous < segments_.size()) retire_segment_if_dead(previous);
      segment = segments_[current_segment_].get();
    }
    const std::size_t capacity = std::min(config_.batch_bytes, config_.segment_bytes - segment->used);
    const std::uint64_t limit = relocation ? config_.max_bytes : append_limit();
    if (limit > 0 && stats_.disk_bytes + capacity > limit) return nullptr;
    Batch* batch = nullptr;
    for (auto& b : batches_) {
      if (b->state == Batch::State::Free) {
        batch = b.get();
        break;
      }
    }
    if (batch == nullptr && batches_.size() < static_cast<std::size_t>(config_.write_buffers)) {
      batches_.push_back(std::make_unique<Batch>());
      batch = batches_.back().get();
      batch->buffer.reserve(config_.batch_bytes);
    }
    if (batch != nullptr) {
      batch->state = Batch::State::Filling;
      batch->capacity = capacity;
      batch->used = 0;
      batch->appended = 0;
      batch->segment = current_segment_;
      batch->file_offset = segment->used;
      batch->slots.clear();
      segment->used += capacity;
      ++segment->pending_batches;
      stats_.disk_bytes += capacity;
      stats_.peak_disk_bytes = std::max(stats_.peak_disk_bytes, stats_.disk_bytes);
      filling_ = batch;
      break;
    }
    if (!wait || failed_) return nullptr;
    waited = true;
    if (!writer_wakeup_) {  // no writer thread: the caller writes
      lock.unlock();
      const bool ok = write_pending(false);
      lock.lock();
      if (!ok) return nullptr;
      continue;
    }
    buffer_free_.wait(lock);
    if (failed_) return nullptr;
  }
  if (waited) stats_.append_wait_ns += monotonic_ns() - start;
  return filling_;
}

L2Slot L2Store::append(const std::byte* page, std::size_t bytes, bool wait) {
  KV_ASSERT(bytes > 0 && bytes <= config_.batch_bytes, "an L2 page must fit in one write batch");
  std::unique_lock lock(mutex_);
  if (failed_) return kNoSlot;
  Batch* batch = writable_batch(bytes, lock, wait);
  if (batch == nullptr) return kNoSlot;
  L2Slot id;
  if (!free_slots_.empty()) {
    id = free_slots_.back();
    free_slots_.pop_back();
  } else {
    id = static_cast<L2Slot>(slots_.size());
    slots_.emplace_back();
  }
  Slot& slot = slots_[id];
  slot.segment = batch->segment;
  slot.offset = batch->file_offset + batch->used;
  slot.bytes = static_cast<std::uint32_t>(bytes);
  slot.checksum = XXH3_64bits(page, bytes);
  slot.batch = batch;
  slot.live = true;
  std::memcpy(batch->buffer.data.get() + batch->used, page, bytes);
  batch->used += bytes;
  batch->appended += bytes;
  batch->slots.push_back(id);
  Segment& segment = *segments_[batch->segment];
  segment.live_bytes += bytes;
  ++segment.live_pages;
  stats_.page_bytes_appended += bytes;
  ++stats_.live_pages;
  stats_.live_bytes += bytes;
  return id;
}

void L2Store::release(L2Slot id) {
  std::lock_guard lock(mutex_);
  KV_ASSERT(id < slots_.size() && slots_[id].live, "release of a dead L2 slot");
  Slot& slot = slots_[id];
  slot.live = false;
  Segment& segment = *segments_[slot.segment];
  segment.live_bytes -= slot.bytes;
  segment.dead_bytes += slot.bytes;
  --segment.live_pages;
  --stats_.live_pages;
  stats_.live_bytes -= slot.bytes;
  // A slot in an unwritten batch stays listed there; the batch skips dead slots when it clears.
  free_slots_.push_back(id);
  retire_segment_if_dead(slot.segment);
}

void L2Store::retire_segment_if_dead(std::uint32_t id) {
  Segment* segment = id < segments_.size() ? segments_[id].get() : nullptr;
  if (segment == nullptr || id == current_segment_ || segment->live_pages > 0 || segment->pending_batches > 0 ||
      segment->reads_in_flight > 0) {
    return;
  }
  io_->close(segment->fd);
  io_->unlink(segment->path);
  stats_.disk_bytes -= segment->used;
  ++stats_.segments_deleted;
  segments_[id].reset();
}

std::size_t L2Store::slot_bytes(L2Slot id) const {
  std::lock_guard lock(mutex_);
  return slots_[id].bytes;
}

bool L2Store::write_batch(Batch& batch) {
  const std::size_t length = align_up(batch.used);
  std::memset(batch.buffer.data.get() + batch.used, 0, length - batch.used);
  int fd;
  std::string path;
  {
    std::lock_guard lock(mutex_);
    fd = segments_[batch.segment]->fd;
    path = segments_[batch.segment]->path;
  }
  const std::uint64_t start = monotonic_ns();
  std::size_t done = 0;
  ssize_t n = 0;
  while (done < length) {
    n = io_->pwrite(fd, batch.buffer.data.get() + done, length - done, static_cast<off_t>(batch.file_offset + done));
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  int sync = 0;
  if (done == length && mode_ == L2Mode::BufferedSync) {
    sync = io_->fdatasync(fd);
    if (sync == 0) io_->drop_cache(fd, static_cast<off_t>(batch.file_offset), static_cast<off_t>(length));
  }
  const std::uint64_t elapsed = monotonic_ns() - start;
  std::lock_guard lock(mutex_);
  stats_.write_ns += elapsed;
  stats_.device_bytes_written += done;
  if (done < length || sync != 0) {
    const int error = sync != 0 ? -sync : (n < 0 ? static_cast<int>(-n) : EIO);
    failed_ = true;
    failure_ = path + ": writing " + std::to_string(length) + " bytes at offset " + std::to_string(batch.file_offset) +
               " failed: " + strerrorname_np(error) + " (" + std::strerror(error) + ")";
    batch.state = Batch::State::Failed;  // its pages stay readable from memory
    buffer_free_.notify_all();
    return false;
  }
  ++stats_.batches_written;
  stats_.flushed_device_bytes += length;
  stats_.flushed_page_bytes += batch.appended;
  for (L2Slot id : batch.slots) {
    if (slots_[id].batch == &batch) slots_[id].batch = nullptr;
  }
  batch.state = Batch::State::Free;
  Segment& segment = *segments_[batch.segment];
  --segment.pending_batches;
  retire_segment_if_dead(batch.segment);
  buffer_free_.notify_all();
  return true;
}

bool L2Store::write_pending(bool all) {
  for (;;) {
    Batch* batch = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (failed_) return false;
      if (full_.empty() && all && filling_ != nullptr && filling_->used > 0) {
        // Flush the partial batch; the segment's next batch starts at the next 4 KiB.
        Segment& segment = *segments_[filling_->segment];
        const std::size_t trimmed = align_up(filling_->used);
        segment.used -= filling_->capacity - trimmed;
        stats_.disk_bytes -= filling_->capacity - trimmed;
        filling_->capacity = trimmed;
        filling_->state = Batch::State::Full;
        full_.push_back(filling_);
        filling_ = nullptr;
      }
      if (full_.empty()) return true;
      batch = full_.front();
      full_.pop_front();
      batch->state = Batch::State::Writing;
    }
    if (!write_batch(*batch)) return false;
  }
}

bool L2Store::has_pending_writes() const {
  std::lock_guard lock(mutex_);
  return !failed_ && !full_.empty();
}

bool L2Store::compact() {
  std::vector<L2Slot> live;
  std::uint32_t victim = 0;
  {
    std::lock_guard lock(mutex_);
    if (failed_) return false;
    double worst = 0.0;
    bool found = false;
    for (std::uint32_t id = 0; id < segments_.size(); ++id) {
      const Segment* s = segments_[id].get();
      if (s == nullptr || id == current_segment_ || s->pending_batches > 0 || s->live_pages == 0) continue;
      const double dead = static_cast<double>(s->dead_bytes) / static_cast<double>(s->live_bytes + s->dead_bytes);
      if (dead >= config_.compact_dead_ratio && dead > worst) {
        worst = dead;
        victim = id;
        found = true;
      }
    }
    if (!found) return false;
    for (L2Slot id = 0; id < slots_.size(); ++id) {
      if (slots_[id].live && slots_[id].segment == victim) live.push_back(id);
    }
  }
  AlignedBuffer page;
  for (L2Slot id : live) {
    std::size_t bytes;
    std::uint64_t offset;
    {
      std::lock_guard lock(mutex_);
      if (!slots_[id].live || slots_[id].segment != victim) continue;
      bytes = slots_[id].bytes;
      offset = slots_[id].offset;
    }
    page.reserve(bytes);
    try {
      read(id, page.data.get());
    } catch (const InputError&) {
      continue;  // stays where it is; the owner's own read will report it
    }
    std::unique_lock lock(mutex_);
    Slot& slot = slots_[id];
    if (!slot.live || slot.segment != victim || slot.offset != offset) continue;
    // The writer thread runs compaction and must not wait for itself; without one, write inline.
    Batch* batch = writable_batch(bytes, lock, !writer_wakeup_, true);
    if (batch == nullptr) return true;  // no buffer free now; resume on a later call
    Segment& old_segment = *segments_[victim];
    old_segment.live_bytes -= bytes;
    old_segment.dead_bytes += bytes;
    --old_segment.live_pages;
    slot.segment = batch->segment;
    slot.offset = batch->file_offset + batch->used;
    slot.batch = batch;
    std::memcpy(batch->buffer.data.get() + batch->used, page.data.get(), bytes);
    batch->used += bytes;
    batch->slots.push_back(id);
    Segment& segment = *segments_[batch->segment];
    segment.live_bytes += bytes;
    ++segment.live_pages;
    stats_.page_bytes_relocated += bytes;
  }
  std::lock_guard lock(mutex_);
  ++stats_.compactions;
  retire_segment_if_dead(victim);
  return true;
}

bool L2Store::failed() const {
  std::lock_guard lock(mutex_);
  return failed_;
}

std::vector<L2Slot> L2Store::unwritten_slots() const {
  std::lock_guard lock(mutex_);
  std::vector<L2Slot> out;
  for (L2Slot id = 0; id < slots_.size(); ++id) {
    if (slots_[id].live && slots_[id].batch != nullptr) out.push_back(id);
  }
  return out;
}

std::string L2Store::failure() const {
  std::lock_guard lock(mutex_);
  return failure_;
}

bool L2Store::full() const {
  std::lock_guard lock(mutex_);
  return append_limit() > 0 && stats_.disk_bytes + config_.batch_bytes > append_limit();
}

L2Stats L2Store::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void L2Store::reset_counters() {
  std::lock_guard lock(mutex_);
  L2Stats kept;
  kept.live_pages = stats_.live_pages;
  kept.live_bytes = stats_.live_bytes;
  kept.disk_bytes = stats_.disk_bytes;
  kept.peak_disk_bytes = stats_.disk_bytes;
  stats_ = kept;
}

}  // namespace kv
