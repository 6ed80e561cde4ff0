// The llama2.c / SentencePiece-BPE tokenizer with run.c's semantics: encoding adds BOS and a
// dummy-prefix space, looks pieces up by UTF-8 codepoint with byte fallback (<0xXX> pieces, or
// the older export's byte pieces at ids 3..258: the byte below 0x80, the UTF-8 of U+0080..U+00FF
// above), then repeatedly merges the adjacent pair
// whose concatenation has the highest score (the first pair on ties; byte-fallback pieces do
// not merge). Decoding strips the space after BOS and maps <0xXX> to raw bytes.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

namespace kv {

class Tokenizer {
 public:
  Tokenizer() = default;
  // pieces[i] with its score; spaces stored as plain ' ' (GGUF's U+2581 is converted by the
  // loader). bos/eos ids must be inside the vocabulary.
  Tokenizer(std::vector<std::string> pieces, std::vector<float> scores, int bos, int eos, std::string source);

  int vocab_size() const { return static_cast<int>(pieces_.size()); }
  int bos() const { return bos_; }
  int eos() const { return eos_; }
  const std::string& piece(int id) const { return pieces_[static_cast<std::size_t>(id)]; }
  const std::string& source() const { return source_; }

  std::vector<int> encode(const std::string& text, bool add_bos, bool add_eos) const;
  // The bytes token `token` prints after `previous` (run.c's decode).
  std::string decode(int previous, int token) const;
  // Decodes a whole sequence of generated tokens that follow `previous`.
  std::string decode_all(int previous, const std::vector<int>& tokens) const;

  // Throws InputError naming both files when this tokenizer cannot serve a model's vocabulary.
  void check_matches(int model_vocab, const std::string& model_path) const;

 private:
  int lookup(const std::string& piece) const;
  bool is_raw_byte(int id) const { return raw_bytes_ && id >= 3 && id < 3 + 256; }
  void merge_pairs(std::vector<int>& tokens) const;

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::unordered_map<std::string, int> ids_;
  int bos_ = 1;
  int eos_ = 2;
  int byte_base_ = -1;  // id of <0x00> (or of raw byte 0); byte b is byte_base_ + b
  bool raw_bytes_ = false;  // ids 3..258 are the older export's byte pieces
  std::string source_;
};

// llama2.c's tokenizer.bin: int32 max_token_length, then vocab_size records of
// (float32 score, int32 length, bytes). The vocabulary size comes from the model.
Tokenizer load_llama2c_tokenizer(const std::string& path, int vocab_size);
Tokenizer parse_llama2c_tokenizer(const std::vector<std::byte>& bytes, const std::string& name, int vocab_size);

}  // namespace kv
