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

TEST_CASE("Both llama2.c exports of a byte-fallback vocabulary encode and decode alike", "[model]") {
  // A small vocabulary with the Llama-2 layout: <unk>, BOS, EOS, 256 byte pieces at ids 3..258,
  // then regular pieces, some of which ("," "a" "\xC3\xA9") duplicate a byte piece of the older
  // export (raw bytes below 0x80, the UTF-8 of U+0080..U+00FF above).
  std::vector<std::string> regular = {" ", ",", "a", "b", " a", "ab", " ab", "\xC3\xA9", ",a"};
  std::vector<float> regular_scores = {-1, -2, -3, -4, -5, -6, -7, -8, -0.5f};
  auto vocabulary = [&](bool raw) {
    std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n"};
    for (int b = 0; b < 256; ++b) {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "<0x%02X>", b);
      const std::string latin1 = b < 0x80 ? std::string(1, static_cast<char>(b))
                                          : std::string{static_cast<char>(0xC0 | (b >> 6)), static_cast<char>(0x80 | (b & 0x3F))};
      pieces.push_back(raw ? latin1 : std::string(hex));
    }
    std::vector<float> scores(pieces.size(), 0.0f);
    pieces.insert(pieces.end(), regular.begin(), regular.end());
    scores.insert(scores.end(), regular_scores.begin(), regular_scores.end());
    return Tokenizer(pieces, scores, 1, 2, raw ? "raw.bin" : "hex.bin");
  };
  const Tokenizer raw = vocabulary(true), hex = vocabulary(false);
  const int comma = 259 + 1, a = 259 + 2, e_acute = 259 + 7;
  CHECK(raw.piece(3 + ',') == ",");
  CHECK(raw.encode(",", false, false) == std::vector<int>{259, comma});  // the regular id, not the byte's
  CHECK(raw.encode("\xC3\xA9", false, false) == std::vector<int>{259, e_acute});
  // ",a" merges from regular pieces; a byte-fallback piece (z, \xE2...) never merges.
  for (const std::string& text : {std::string("a,a ab"), std::string("ab,ab z\xE2\x9C\x93"), std::string("\xC3\xA9,a\tb")}) {
    CAPTURE(text);
    const std::vector<int> ids = raw.encode(text, true, false);
    CHECK(hex.encode(text, true, false) == ids);
    CHECK(raw.decode_all(1, std::vector<int>(ids.begin() + 1, ids.end())) == text);
    CHECK(hex.decode_all(1, std::vector<int>(ids.begin() + 1, ids.end())) == text);
  }
  CHECK(raw.encode("a,a", false, false) == std::vector<int>{259 + 4, 259 + 8});  // " a" ",a"
  CHECK(std::find(raw.encode("z", false, false).begin(), raw.encode("z", false, false).end(), 3 + 'z') != raw.encode("z", false, false).end());
  CHECK(a == 261);
}
