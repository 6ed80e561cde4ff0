#include "model/byte_reader.h"

#include <fstream>

#include "runtime/error.h"

namespace kv {

std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) throw InputError(path, "", "cannot open file");
  const std::streamoff size = in.tellg();
  if (size < 0) throw InputError(path, "", "cannot determine the file size");
  std::vector<std::byte> bytes(static_cast<std::size_t>(size));
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char*>(bytes.data()), size)) {
    throw InputError(path, "", "read failed");
  }
  return bytes;
}

void ByteReader::fail(const std::string& reason) const {
  throw InputError(path_, "offset " + std::to_string(offset_), reason);
}

void ByteReader::require(std::size_t bytes, const char* what) const {
  if (bytes > remaining()) {
    fail(std::string("truncated: ") + what + " needs " + std::to_string(bytes) + " bytes, " +
         std::to_string(remaining()) + " left of " + std::to_string(size()));
  }
}

void ByteReader::seek(std::size_t offset, const char* what) {
  if (offset > bytes_.size()) {
    fail(std::string(what) + " at offset " + std::to_string(offset) + " is past the end of the file (" +
         std::to_string(bytes_.size()) + " bytes)");
  }
  offset_ = offset;
}

std::string ByteReader::read_string(std::size_t length, const char* what) {
  require(length, what);
  std::string s(reinterpret_cast<const char*>(bytes_.data() + offset_), length);
  offset_ += length;
  return s;
}

void ByteReader::read_floats(float* out, std::size_t count, const char* what) {
  if (count > remaining() / sizeof(float)) require(count * sizeof(float), what);
  std::memcpy(out, bytes_.data() + offset_, count * sizeof(float));
  offset_ += count * sizeof(float);
}

const std::byte* ByteReader::pointer(std::size_t bytes, const char* what) {
  require(bytes, what);
  const std::byte* p = bytes_.data() + offset_;
  offset_ += bytes;
  return p;
}

}  // namespace kv
