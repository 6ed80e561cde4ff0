// Bounds-checked little-endian reads from a file held in memory. Every failure is an
// InputError naming the file, the byte offset and what was being read, so a truncated or
// corrupted model file gets a clear message and never an out-of-bounds read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace kv {

// Reads the whole file; throws InputError when it cannot be opened or read.
std::vector<std::byte> read_file(const std::string& path);

class ByteReader {
 public:
  ByteReader(const std::vector<std::byte>& bytes, std::string path) : bytes_(bytes), path_(std::move(path)) {}

  std::size_t offset() const { return offset_; }
  std::size_t size() const { return bytes_.size(); }
  std::size_t remaining() const { return bytes_.size() - offset_; }
  const std::string& path() const { return path_; }
  void seek(std::size_t offset, const char* what);

  template <typename T>
  T read(const char* what) {
    require(sizeof(T), what);
    T value;
    std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return value;
  }
  std::string read_string(std::size_t length, const char* what);
  // Copies count floats; the caller's buffer must hold them.
  void read_floats(float* out, std::size_t count, const char* what);
  const std::byte* pointer(std::size_t bytes, const char* what);

  [[noreturn]] void fail(const std::string& reason) const;

 private:
  void require(std::size_t bytes, const char* what) const;

  const std::vector<std::byte>& bytes_;
  std::string path_;
  std::size_t offset_ = 0;
};

}  // namespace kv
