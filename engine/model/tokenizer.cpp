#include "model/tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <queue>

#include "model/byte_reader.h"
#include "runtime/error.h"

namespace kv {

namespace {

// How the older export stores byte b: the byte itself below 0x80, above it the UTF-8 of the
// Latin-1 character U+0080..U+00FF (two bytes).
std::string raw_byte_piece(int b) {
  if (b < 0x80) return std::string(1, static_cast<char>(b));
  return {static_cast<char>(0xC0 | (b >> 6)), static_cast<char>(0x80 | (b & 0x3F))};
}

}  // namespace

Tokenizer::Tokenizer(std::vector<std::string> pieces, std::vector<float> scores, int bos, int eos, std::string source)
    : pieces_(std::move(pieces)), scores_(std::move(scores)), bos_(bos), eos_(eos), source_(std::move(source)) {
  if (pieces_.empty() || pieces_.size() != scores_.size()) {
    throw InputError(source_, "vocabulary", "empty, or pieces and scores differ in count");
  }
  if (bos_ < 0 || bos_ >= vocab_size()) throw InputError(source_, "bos", "token id outside the vocabulary");
  if (eos_ < 0 || eos_ >= vocab_size()) throw InputError(source_, "eos", "token id outside the vocabulary");
  // The byte-fallback block: 256 pieces <0x00>..<0xFF> (later llama2.c exports), or the raw
  // bytes themselves at ids 3..258 (the older export of the Llama-2 tokenizer).
  auto it = std::find(pieces_.begin(), pieces_.end(), "<0x00>");
  if (it != pieces_.end()) {
    byte_base_ = static_cast<int>(it - pieces_.begin());
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      if (byte_base_ + b >= vocab_size() || pieces_[static_cast<std::size_t>(byte_base_ + b)] != name) {
        byte_base_ = -1;  // not a contiguous byte-fallback block
        break;
      }
    }
  }
  if (byte_base_ < 0 && vocab_size() >= 3 + 256) {
    raw_bytes_ = true;
    for (int b = 0; b < 256 && raw_bytes_; ++b) raw_bytes_ = pieces_[static_cast<std::size_t>(3 + b)] == raw_byte_piece(b);
    if (raw_bytes_) byte_base_ = 3;
  }
  // A raw byte piece that duplicates a regular piece ("," as a byte and as a word piece) maps
  // to the regular id, as the <0xNN> export does: both files then encode a text alike.
  ids_.reserve(pieces_.size());
  for (int i = 0; i < vocab_size(); ++i) {
    if (!is_raw_byte(i)) ids_.emplace(pieces_[static_cast<std::size_t>(i)], i);  // first id wins
  }
  if (raw_bytes_) {
    for (int b = 0; b < 256; ++b) ids_.emplace(pieces_[static_cast<std::size_t>(3 + b)], 3 + b);
  }
}

int Tokenizer::lookup(const std::string& piece) const {
  auto it = ids_.find(piece);
  return it == ids_.end() ? -1 : it->second;
}

std::vector<int> Tokenizer::encode(const std::string& text, bool add_bos, bool add_eos) const {
  std::vector<int> tokens;
  if (add_bos) tokens.push_back(bos_);
  if (!text.empty()) {
    const int space = lookup(" ");
    if (space >= 0) tokens.push_back(space);
  }
  // Codepoints: a lead byte and its continuation bytes (at most 4 bytes).
  for (std::size_t i = 0; i < text.size();) {
    std::size_t end = i + 1;
    while (end < text.size() && end - i < 4 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    const std::string codepoint = text.substr(i, end - i);
    const int id = lookup(codepoint);
    if (id >= 0) {
      tokens.push_back(id);
    } else {
      for (char c : codepoint) {
        // Byte fallback; without byte pieces, run.c's rule maps byte b to id b + 3.
        const int base = byte_base_ >= 0 ? byte_base_ : 3;
        tokens.push_back(base + static_cast<unsigned char>(c));
      }
    }
    i = end;
  }
  merge_pairs(tokens);
  if (add_eos) tokens.push_back(eos_);
  return tokens;
}

// run.c's rule - merge the adjacent pair with the highest score, the leftmost on ties, until no
// pair merges - done with a heap of candidate pairs over a linked list instead of rescanning
// the whole text after every merge (quadratic on long texts). A candidate is stale once either
// side has changed; the left side's original index orders ties exactly as run.c's scan does.
void Tokenizer::merge_pairs(std::vector<int>& tokens) const {
  struct Node {
    int id, prev, next, version;
  };
  struct Candidate {
    float score;
    int left, right, left_version, right_version, merged;
    bool operator<(const Candidate& o) const { return score != o.score ? score < o.score : left > o.left; }
  };
  const int n = static_cast<int>(tokens.size());
  std::vector<Node> nodes(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) nodes[static_cast<std::size_t>(i)] = {tokens[static_cast<std::size_t>(i)], i - 1, i + 1 < n ? i + 1 : -1, 0};
  std::priority_queue<Candidate> heap;
  auto consider = [&](int left) {
    if (left < 0) return;
    const Node& l = nodes[static_cast<std::size_t>(left)];
    if (l.next < 0) return;
    const Node& r = nodes[static_cast<std::size_t>(l.next)];
    if (is_raw_byte(l.id) || is_raw_byte(r.id)) return;  // byte fallback never merges (<0xNN> pieces cannot)
    const int merged = lookup(piece(l.id) + piece(r.id));
    if (merged >= 0) heap.push({scores_[static_cast<std::size_t>(merged)], left, l.next, l.version, r.version, merged});
  };
  for (int i = 0; i < n; ++i) consider(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Node& l = nodes[static_cast<std::size_t>(c.left)];
    Node& r = nodes[static_cast<std::size_t>(c.right)];
    if (l.version != c.left_version || r.version != c.right_version || l.next != c.right) continue;
    l.id = c.merged;
    ++l.version;
    r.version = -1;  // removed
    l.next = r.next;
    if (r.next >= 0) nodes[static_cast<std::size_t>(r.next)].prev = c.left;
    consider(l.prev);
    consider(c.left);
  }
  tokens.clear();
  for (int i = n > 0 ? 0 : -1; i >= 0; i = nodes[static_cast<std::size_t>(i)].next) tokens.push_back(nodes[static_cast<std::size_t>(i)].id);
}

std::string Tokenizer::decode(int previous, int token) const {
  if (token < 0 || token >= vocab_size()) return {};
  if (is_raw_byte(token)) return std::string(1, static_cast<char>(token - 3));  // the byte, as <0xNN> decodes
  std::string text = piece(token);
  if (previous == bos_ && !text.empty() && text[0] == ' ') text.erase(0, 1);
  unsigned int byte = 0;
  char tail = 0;
  if (text.size() == 6 && std::sscanf(text.c_str(), "<0x%02X>%c", &byte, &tail) == 1) {
    return std::string(1, static_cast<char>(byte));
  }
  return text;
}

std::string Tokenizer::decode_all(int previous, const std::vector<int>& tokens) const {
  std::string text;
  for (int token : tokens) {
    text += decode(previous, token);
    previous = token;
  }
  return text;
}

void Tokenizer::check_matches(int model_vocab, const std::string& model_path) const {
  if (model_vocab != vocab_size()) {
    throw InputError(source_, "vocab_size",
                     "tokenizer has " + std::to_string(vocab_size()) + " pieces but model " + model_path + " has " +
                         std::to_string(model_vocab) + " tokens");
  }
}

Tokenizer load_llama2c_tokenizer(const std::string& path, int vocab_size) {
  return parse_llama2c_tokenizer(read_file(path), path, vocab_size);
}

Tokenizer parse_llama2c_tokenizer(const std::vector<std::byte>& bytes, const std::string& path, int vocab_size) {
  if (vocab_size <= 0) throw InputError(path, "vocab_size", "must be > 0");
  ByteReader in(bytes, path);
  const auto max_length = in.read<std::int32_t>("max_token_length");
  if (max_length <= 0 || max_length > 1024) in.fail("max_token_length " + std::to_string(max_length) + " is outside 1..1024");
  std::vector<std::string> pieces;
  std::vector<float> scores;
  pieces.reserve(static_cast<std::size_t>(vocab_size));
  for (int i = 0; i < vocab_size; ++i) {
    const float score = in.read<float>("piece score");
    const auto length = in.read<std::int32_t>("piece length");
    if (length < 0 || length > max_length) {
      in.fail("piece " + std::to_string(i) + " has length " + std::to_string(length) + " (max_token_length " +
              std::to_string(max_length) + ")");
    }
    pieces.push_back(in.read_string(static_cast<std::size_t>(length), "piece bytes"));
    scores.push_back(score);
  }
  if (in.remaining() != 0) {
    in.fail(std::to_string(in.remaining()) + " bytes after " + std::to_string(vocab_size) +
            " pieces: the tokenizer does not match the model's vocabulary");
  }
  return Tokenizer(std::move(pieces), std::move(scores), 1, 2, path);
}

}  // namespace kv
