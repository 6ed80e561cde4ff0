#include "memory/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace kv {

namespace {

class PosixFileIo final : public FileIo {
 public:
  int open(const std::string& path, int flags, int mode) override {
    const int fd = ::open(path.c_str(), flags | O_CLOEXEC, mode);
    return fd >= 0 ? fd : -errno;
  }
  ssize_t pwrite(int fd, const void* data, std::size_t bytes, off_t offset) override {
    ssize_t n;
    do n = ::pwrite(fd, data, bytes, offset);
    while (n < 0 && errno == EINTR);
    return n >= 0 ? n : -errno;
  }
  ssize_t pread(int fd, void* data, std::size_t bytes, off_t offset) override {
    ssize_t n;
    do n = ::pread(fd, data, bytes, offset);
    while (n < 0 && errno == EINTR);
    return n >= 0 ? n : -errno;
  }
  int fdatasync(int fd) override { return ::fdatasync(fd) == 0 ? 0 : -errno; }
  int drop_cache(int fd, off_t offset, off_t bytes) override {
    return -::posix_fadvise(fd, offset, bytes, POSIX_FADV_DONTNEED);
  }
  int close(int fd) override { return ::close(fd) == 0 ? 0 : -errno; }
  int unlink(const std::string& path) override { return ::unlink(path.c_str()) == 0 ? 0 : -errno; }
};

}  // namespace

FileIo& posix_file_io() {
  static PosixFileIo io;
  return io;
}

void FaultyFileIo::fail_writes_after(int ok_writes, int error) {
  write_error_.store(error);
  writes_left_.store(ok_writes);
}

void FaultyFileIo::heal() {
  writes_left_.store(-1);
  short_write_.store(false);
  read_error_.store(0);
  corrupt_reads_.store(false);
}

ssize_t FaultyFileIo::pwrite(int fd, const void* data, std::size_t bytes, off_t offset) {
  ++writes_;
  int left = writes_left_.load();
  while (left > 0 && !writes_left_.compare_exchange_weak(left, left - 1)) {
  }
  if (left == 0) return -write_error_.load();
  if (short_write_.exchange(false) && bytes > 1) return inner_.pwrite(fd, data, bytes / 2, offset);
  return inner_.pwrite(fd, data, bytes, offset);
}

ssize_t FaultyFileIo::pread(int fd, void* data, std::size_t bytes, off_t offset) {
  ++reads_;
  if (const int error = read_error_.load(); error != 0) return -error;
  const ssize_t n = inner_.pread(fd, data, bytes, offset);
  if (n > 0 && corrupt_reads_.load()) static_cast<unsigned char*>(data)[n / 2] ^= 0x5A;
  return n;
}

}  // namespace kv
