#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

#include "model/byte_reader.h"
#include "model/tokenizer.h"
#include "runtime/error.h"
#include "test_support.h"

using namespace kv;

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("tok512 encodes the prompt of test vector 2", "[model]") {
  const Tokenizer tok = load_llama2c_tokenizer(kvtest::model_file("tok512.bin"), 512);
  CHECK(tok.vocab_size() == 512);
  CHECK(tok.piece(259) == " t");
  CHECK(tok.piece(13) == "<0x0A>");
  CHECK(tok.encode("Once upon a time", true, false) == std::vector<int>{1, 403, 407, 261, 378});
  CHECK(tok.encode("", true, false) == std::vector<int>{1});
  CHECK(tok.encode("", true, true) == std::vector<int>{1, 2});
}

TEST_CASE("Encoding tinystories-sample.txt gives 31,386 tokens that decode to the file", "[model]") {
  const Tokenizer tok = load_llama2c_tokenizer(kvtest::model_file("tok512.bin"), 512);
  const std::string text = slurp(kvtest::model_file("tinystories-sample.txt"));
  const std::vector<int> tokens = tok.encode(text, true, false);
  CHECK(tokens.size() == 31386);
  CHECK(std::vector<int>(tokens.begin(), tokens.begin() + 12) ==
        std::vector<int>{1, 301, 427, 309, 426, 301, 427, 309, 394, 265, 262, 415});
  CHECK(tok.decode_all(tokens[0], std::vector<int>(tokens.begin() + 1, tokens.end())) == text);
}

TEST_CASE("Byte fallback and non-ASCII text round-trip", "[model]") {
  const Tokenizer tok = load_llama2c_tokenizer(kvtest::model_file("tok512.bin"), 512);
  const std::string text = "caf\xC3\xA9 \xE2\x9C\x93 tab\there";
  const auto tokens = tok.encode(text, true, false);
  CHECK(tok.decode_all(tokens[0], std::vector<int>(tokens.begin() + 1, tokens.end())) == text);
}

TEST_CASE("A tokenizer that does not match the model is refused", "[model]") {
  const std::string path = kvtest::model_file("tok512.bin");
  CHECK_THROWS_WITH(load_llama2c_tokenizer(path, 600), Catch::Contains(path) && Catch::Contains("truncated"));
  CHECK_THROWS_WITH(load_llama2c_tokenizer(path, 500), Catch::Contains("does not match"));
  const Tokenizer tok = load_llama2c_tokenizer(path, 512);
  CHECK_THROWS_WITH(tok.check_matches(32000, "llama.bin"), Catch::Contains("llama.bin") && Catch::Contains("32000"));
  CHECK_THROWS_WITH(load_llama2c_tokenizer(kvtest::model_file("stories260K.bin"), 512),
                    Catch::Contains("max_token_length"));
}
