// The L2 tier's file I/O, behind a small interface so tests can inject faults (short writes,
// EIO, ENOSPC, corrupted reads) without root or special mounts. Calls follow POSIX but return
// -errno instead of setting errno, so they are safe to call from any thread.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kv {

class FileIo {
 public:
  virtual ~FileIo() = default;
  virtual int open(const std::string& path, int flags, int mode) = 0;  // fd or -errno
  virtual ssize_t pwrite(int fd, const void* data, std::size_t bytes, off_t offset) = 0;  // bytes or -errno
  virtual ssize_t pread(int fd, void* data, std::size_t bytes, off_t offset) = 0;        // bytes or -errno
  virtual int fdatasync(int fd) = 0;
  virtual int drop_cache(int fd, off_t offset, off_t bytes) = 0;  // posix_fadvise(DONTNEED)
  virtual int close(int fd) = 0;
  virtual int unlink(const std::string& path) = 0;
};

// The real thing.
FileIo& posix_file_io();

// Wraps another FileIo and fails on request. Every knob is atomic: the migrator thread does
// the I/O while a test thread arms faults.
class FaultyFileIo final : public FileIo {
 public:
  explicit FaultyFileIo(FileIo& inner = posix_file_io()) : inner_(inner) {}

  // After `ok_writes` more successful pwrites, every pwrite fails with -error (ENOSPC, EIO).
  void fail_writes_after(int ok_writes, int error);
  // The next pwrite writes only half its bytes (a short write).
  void short_write_once() { short_write_.store(true); }
  // Every pread fails with -error (0: stop failing).
  void fail_reads(int error) { read_error_.store(error); }
  // Every pread returns its bytes with one byte flipped (a corrupted read).
  void corrupt_reads(bool on) { corrupt_reads_.store(on); }
  void heal();

  std::uint64_t writes() const { return writes_.load(); }
  std::uint64_t reads() const { return reads_.load(); }

  int open(const std::string& path, int flags, int mode) override { return inner_.open(path, flags, mode); }
  ssize_t pwrite(int fd, const void* data, std::size_t bytes, off_t offset) override;
  ssize_t pread(int fd, void* data, std::size_t bytes, off_t offset) override;
  int fdatasync(int fd) override { return inner_.fdatasync(fd); }
  int drop_cache(int fd, off_t offset, off_t bytes) override { return inner_.drop_cache(fd, offset, bytes); }
  int close(int fd) override { return inner_.close(fd); }
  int unlink(const std::string& path) override { return inner_.unlink(path); }

 private:
  FileIo& inner_;
  std::atomic<int> writes_left_{-1};  // -1: no write fault armed
  std::atomic<int> write_error_{0};
  std::atomic<bool> short_write_{false};
  std::atomic<int> read_error_{0};
  std::atomic<bool> corrupt_reads_{false};
  std::atomic<std::uint64_t> writes_{0}, reads_{0};
};

}  // namespace kv
