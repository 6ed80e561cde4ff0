// The L2 tier: real files standing for UFS/NVMe flash.
//
// Pages are appended to a DRAM write buffer and written in batches (each batch starts at a
// 4 KiB-aligned offset) to log-structured segment files of at least 4 MiB, and read back with
// positional reads. I/O bypasses the page cache: O_DIRECT with 4 KiB-aligned buffers, offsets
// and lengths where the filesystem accepts it, otherwise plain writes followed by fdatasync and
// posix_fadvise(DONTNEED) per batch, so the bandwidth measured is the device's. Every page
// carries an xxHash (XXH3-64 over its bytes, kept in the slot table) verified on every read; a
// mismatch or a short read is an InputError naming the segment file and the page.
//
// A slot is a page's handle; its location can move (compaction relocates the live pages of
// segments that are mostly dead) without the owner noticing. A segment whose pages are all dead
// is deleted. The store lives in its own directory `<l2_dir>/kvbench-l2-<pid>-<n>` holding a
// flock'ed lock file; it is removed when the store closes, and directories whose lock is free
// (left by a killed process) are removed when a store opens.
//
// Threading: append/release run on the owner's thread; write_pending, compact and read run on
// the migrator thread (read may run on any thread). One mutex guards the tables; I/O runs
// outside it.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "memory/file_io.h"

namespace kv {

inline constexpr std::size_t kMinSegmentBytes = 4u << 20;
inline constexpr std::size_t kL2Align = 4096;

struct L2Config {
  std::string dir;                        // an existing, writable directory
  std::size_t segment_bytes = 16u << 20;  // >= 4 MiB, a multiple of 4 KiB
  std::size_t batch_bytes = 4u << 20;     // one write buffer, a multiple of 4 KiB
  int write_buffers = 3;                  // batches filling or waiting for the device
  std::size_t max_bytes = 0;              // segment bytes the store may hold on disk; 0: no cap
  // Of max_bytes, the share only compaction may fill: appends stop (full) short of it, so that a
  // full store can still relocate live pages and free segments instead of failing writes.
  double overprovision = 0.10;
  double compact_dead_ratio = 0.5;        // a full segment with this share of dead bytes is compacted
  bool direct_io = true;                  // try O_DIRECT; false: always the buffered+sync mode
  int queue_depth = 4;                    // reads in flight at once (the migrator's reader threads)
  // Reads, writes and compaction on the calling thread, no migrator threads: a load runs when
  // it is queued, full batches are written after the demotion that filled them. For runs that
  // count the engine's work (the sim clock), where work on other threads would go uncounted.
  bool synchronous = false;
  std::size_t max_read_bytes = 1u << 20;  // adjacent pages read with one I/O up to this many bytes
  FileIo* io = nullptr;                   // nullptr: the real POSIX calls
};

// The filesystem type of a path (ext4, xfs, tmpfs...), "unknown" when statfs fails.
std::string filesystem_type(const std::string& path);

// Throws InputError("l2 config", field, reason).
void validate_l2_config(const L2Config& config);

enum class L2Mode : std::uint8_t { Direct, BufferedSync };
const char* l2_mode_name(L2Mode mode);

struct L2Stats {
  std::uint64_t page_bytes_appended = 0;  // page bytes handed to the store (relocations excluded)
  std::uint64_t page_bytes_relocated = 0; // page bytes rewritten by compaction
  std::uint64_t device_bytes_written = 0; // bytes written to files, batch padding included
  std::uint64_t device_bytes_read = 0;    // bytes read from files, alignment included
  std::uint64_t page_bytes_read = 0;      // page bytes returned by read()
  std::uint64_t pages_read = 0;
  std::uint64_t read_ios = 0;             // preads issued for pages (a joined read is one)
  std::uint64_t reads_from_buffer = 0;    // reads served by a batch not yet on the device
  std::uint64_t batches_written = 0;
  // Of the batches written intact: their device bytes (padding and relocated pages included)
  // and the appended page bytes they carried. Their ratio is the write amplification, >= 1.
  std::uint64_t flushed_device_bytes = 0;
  std::uint64_t flushed_page_bytes = 0;
  std::uint64_t write_ns = 0;             // time inside pwrite/fdatasync
  std::uint64_t read_ns = 0;              // time with at least one pread in flight (wall, not summed)
  std::uint64_t append_wait_ns = 0;       // appends blocked on a full set of write buffers
  std::uint64_t segments_created = 0;
  std::uint64_t segments_deleted = 0;
  std::uint64_t compactions = 0;
  std::uint64_t live_pages = 0;
  std::uint64_t live_bytes = 0;
  std::uint64_t disk_bytes = 0;           // segment bytes on disk now
  std::uint64_t peak_disk_bytes = 0;
};

using L2Slot = std::uint32_t;
inline constexpr L2Slot kNoSlot = 0xFFFFFFFFu;
inline constexpr std::uint32_t kNoSegment = 0xFFFFFFFFu;
// Pages this close on the device are read with one I/O, the bytes between read and dropped: a
// write batch's padding before the next batch is under a page.
inline constexpr std::uint64_t kMaxJoinGap = 64u << 10;

// Where a page lies: on the device in a segment at an offset, or kNoSegment while its batch is
// still in memory (or for a dead slot).
struct L2Location {
  std::uint32_t segment = kNoSegment;
  std::uint64_t offset = 0;
  std::uint32_t bytes = 0;
};

class L2Store {
 public:
  // Throws InputError naming the directory when it is missing, not a directory or not writable.
  explicit L2Store(const L2Config& config);
  ~L2Store();
  L2Store(const L2Store&) = delete;
  L2Store& operator=(const L2Store&) = delete;

  // Copies a page into the write buffer. Returns kNoSlot when the store cannot take it: full
  // (max_bytes), failed (an earlier I/O error), or all write buffers busy and wait == false.
  // With every buffer busy and wait == true, it waits for the writer thread, or without one
  // (no set_writer_wakeup) writes the oldest batch itself.
  L2Slot append(const std::byte* page, std::size_t bytes, bool wait = true);
  // The page is dead; its bytes are reclaimed when its segment is deleted or compacted.
  void release(L2Slot slot);
  // Copies the page into dst (slot's bytes), verifying its checksum. Throws InputError naming
  // the segment file and the page on a checksum mismatch, a short read or an I/O error.
  void read(L2Slot slot, std::byte* dst);
  // Pages that lie one after the other in one segment (gaps under kMaxJoinGap)
  // with one I/O, each verified like read(). Per page the error read() would throw, "" when
  // read intact. Pages that no longer lie so (moved, or back in memory) are read one by one.
  std::vector<std::string> read_run(const std::vector<L2Slot>& slots, const std::vector<std::byte*>& dsts);
  L2Location location(L2Slot slot) const;
  std::size_t slot_bytes(L2Slot slot) const;

  // Writes the batches that are full (all == true: also the one filling, padded to 4 KiB).
  // Returns false when a write failed: the store is failed from then on (failure() says why),
  // and the pages of unwritten batches stay readable from memory.
  bool write_pending(bool all = false);
  bool has_pending_writes() const;
  // Relocates the live pages of the full segment with the most dead bytes when that share is at
  // least compact_dead_ratio. Returns whether it compacted one.
  bool compact();

  bool failed() const;
  std::string failure() const;
  // The live slots whose page only a batch in memory holds. After a failure the store writes
  // nothing more: these pages have no copy on the device and never will.
  std::vector<L2Slot> unwritten_slots() const;
  bool full() const;  // appends reached max_bytes less the overprovisioned share
  L2Mode mode() const { return mode_; }
  const std::string& fs_type() const { return fs_type_; }
  bool on_ram() const { return on_ram_; }  // tmpfs/ramfs: "flash" here is RAM
  const std::string& path() const { return path_; }
  L2Stats stats() const;
  // Counters from zero and the disk peak at today's size (the live pages and files stay): what
  // was written before - a warm-up pass - is not counted in what follows.
  void reset_counters();
  // Called (under no lock of the store) when a batch is ready for the device, so the owner's
  // writer thread can run write_pending().
  void set_writer_wakeup(std::function<void()> wakeup);

 private:
  struct Slot;
  struct Segment;
  struct Batch;

  // relocation: for compaction, which may use the overprovisioned share of max_bytes.
  Batch* writable_batch(std::size_t bytes, std::unique_lock<std::mutex>& lock, bool wait, bool relocation = false);
  std::uint64_t append_limit() const;  // segment bytes appends may fill; 0: no cap
  bool open_segment(std::unique_lock<std::mutex>& lock);
  void retire_segment_if_dead(std::uint32_t segment);
  bool write_batch(Batch& batch);
  [[noreturn]] void read_error(const Slot& slot, L2Slot id, const std::string& reason) const;
  std::string read_error_text(const Slot& slot, L2Slot id, const std::string& reason) const;
  // Bytes [from, to) of a segment (aligned out to 4 KiB in direct mode) into this thread's
  // bounce buffer: called and returning under the lock, the pread itself outside it (the
  // segment counts the read in flight meanwhile). Where the read began, how much it got, the
  // last pread's return (negative: the error) and the bytes; the read counters are updated.
  struct SpanRead {
    std::size_t begin = 0, done = 0;
    ssize_t last = 0;
    const std::byte* data = nullptr;
  };
  SpanRead device_read(Segment& segment, std::unique_lock<std::mutex>& lock, std::uint64_t from, std::uint64_t to);
  // Under the lock, around a pread: read_ns counts the time any read is in flight.
  void begin_device_read();
  void end_device_read();

  L2Config config_;
  FileIo* io_;
  std::string path_;
  int lock_fd_ = -1;
  L2Mode mode_ = L2Mode::BufferedSync;
  std::string fs_type_;
  bool on_ram_ = false;

  mutable std::mutex mutex_;
  std::condition_variable buffer_free_;
  std::vector<Slot> slots_;
  std::vector<L2Slot> free_slots_;
  std::vector<std::unique_ptr<Segment>> segments_;  // index = segment id; null once deleted
  std::vector<std::unique_ptr<Batch>> batches_;
  std::deque<Batch*> full_;  // batches waiting for the device, oldest first
  Batch* filling_ = nullptr;
  std::uint32_t current_segment_ = 0xFFFFFFFFu;
  bool failed_ = false;
  std::string failure_;
  int reads_active_ = 0;
  std::uint64_t read_busy_since_ = 0;
  L2Stats stats_;
  std::function<void()> writer_wakeup_;
};

}  // namespace kv
