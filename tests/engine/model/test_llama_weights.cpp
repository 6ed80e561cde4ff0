#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <vector>

#include "model/byte_reader.h"
#include "model/llama_weights.h"
#include "runtime/error.h"
#include "test_support.h"

using namespace kv;

namespace {

void write_bytes(const std::string& path, const std::vector<std::byte>& bytes, std::size_t count) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(count));
}

}  // namespace

TEST_CASE("stories260K.bin loads with its documented header", "[model]") {
  const LlamaWeights w = load_llama2c(kvtest::model_file("stories260K.bin"));
  const LlamaConfig& c = w.config;
  CHECK(c.dim == 64);
  CHECK(c.hidden_dim == 172);
  CHECK(c.layers == 5);
  CHECK(c.heads == 8);
  CHECK(c.kv_heads == 4);
  CHECK(c.vocab_size == 512);
  CHECK(c.seq_len == 512);
  CHECK(c.head_dim() == 8);
  CHECK(w.wk.rows() == 5u * 32);
  CHECK(w.wk.cols() == 64);
  CHECK(w.wcls.to_f32() == w.token_embedding);  // shared classifier
}

TEST_CASE("A truncated or padded checkpoint is refused with the file named", "[model]") {
  const std::string source = kvtest::model_file("stories260K.bin");
  const std::vector<std::byte> bytes = read_file(source);
  const std::string path = kvtest::temp_path("truncated.bin");
  for (std::size_t size : {std::size_t{0}, std::size_t{10}, std::size_t{28}, bytes.size() / 2, bytes.size() - 1}) {
    write_bytes(path, bytes, size);
    CAPTURE(size);
    CHECK_THROWS_WITH(load_llama2c(path), Catch::Contains(path) && (Catch::Contains("truncated") || Catch::Contains("bytes")));
  }
  std::vector<std::byte> longer = bytes;
  longer.push_back(std::byte{0});
  write_bytes(path, longer, longer.size());
  CHECK_THROWS_WITH(load_llama2c(path), Catch::Contains("trailing data"));
  std::remove(path.c_str());
  CHECK_THROWS_WITH(load_llama2c(path), Catch::Contains("cannot open"));
}

TEST_CASE("Absurd checkpoint headers are refused before allocating", "[model]") {
  const std::string path = kvtest::temp_path("header.bin");
  auto header = [&](std::vector<std::int32_t> fields) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(fields.data()), static_cast<std::streamsize>(fields.size() * 4));
  };
  header({64, 172, 5, 8, 4, 512, 512});
  CHECK_THROWS_WITH(load_llama2c(path), Catch::Contains("truncated"));
  header({1 << 30, 172, 5, 8, 4, 512, 512});
  CHECK_THROWS_WITH(load_llama2c(path), Catch::Contains("dim"));
  header({64, 172, 5, 8, 3, 512, 512});
  CHECK_THROWS_WITH(load_llama2c(path), Catch::Contains("n_kv_heads"));
  header({64, 172, 5, 0, 4, 512, 512});
  CHECK_THROWS_WITH(load_llama2c(path), Catch::Contains("n_heads"));
  header({64, 172, -5, 8, 4, 512, 512});
  CHECK_THROWS_WITH(load_llama2c(path), Catch::Contains("n_layers"));
  header({64, 172, 5, 8, 4, INT32_MIN, 512});
  CHECK_THROWS_WITH(load_llama2c(path), Catch::Contains("vocab_size"));
  std::remove(path.c_str());
}
