#include "model/llama_weights.h"

#include <cmath>
#include <cstdint>
#include <utility>

#include "model/byte_reader.h"
#include "runtime/error.h"

namespace kv {

namespace {

// Limits well above any on-device model; they stop absurd headers from allocating terabytes.
constexpr int kMaxDim = 1 << 16;
constexpr int kMaxLayers = 1024;
constexpr int kMaxVocab = 1 << 21;
constexpr int kMaxSeq = 1 << 22;

void check_range(const std::string& where, const char* field, int value, int lo, int hi) {
  if (value < lo || value > hi) {
    throw InputError(where, field, std::to_string(value) + " is outside " + std::to_string(lo) + ".." + std::to_string(hi));
  }
}

}  // namespace

void validate_llama_config(const LlamaConfig& c, const std::string& where) {
  check_range(where, "dim", c.dim, 1, kMaxDim);
  check_range(where, "hidden_dim", c.hidden_dim, 1, 4 * kMaxDim);
  check_range(where, "n_layers", c.layers, 1, kMaxLayers);
  check_range(where, "n_heads", c.heads, 1, c.dim);
  check_range(where, "n_kv_heads", c.kv_heads, 1, c.heads);
  check_range(where, "vocab_size", c.vocab_size, 1, kMaxVocab);
  check_range(where, "seq_len", c.seq_len, 1, kMaxSeq);
  if (c.dim % c.heads != 0) {
    throw InputError(where, "n_heads", "dim " + std::to_string(c.dim) + " is not a multiple of n_heads " + std::to_string(c.heads));
  }
  if (c.heads % c.kv_heads != 0) {
    throw InputError(where, "n_kv_heads",
                     "n_heads " + std::to_string(c.heads) + " is not a multiple of n_kv_heads " + std::to_string(c.kv_heads));
  }
  if (c.head_dim() % 2 != 0) throw InputError(where, "n_heads", "head size must be even for RoPE");
  if (!(c.rope_theta > 0.0f) || !std::isfinite(c.rope_theta)) throw InputError(where, "rope_theta", "must be finite and > 0");
  if (!(c.norm_eps > 0.0f) || !std::isfinite(c.norm_eps)) throw InputError(where, "norm_eps", "must be finite and > 0");
}

LlamaWeights load_llama2c(const std::string& path) { return parse_llama2c(read_file(path), path); }

LlamaWeights parse_llama2c(const std::vector<std::byte>& bytes, const std::string& path) {
  ByteReader in(bytes, path);
  LlamaWeights w;
  LlamaConfig& c = w.config;
  c.dim = in.read<std::int32_t>("header dim");
  c.hidden_dim = in.read<std::int32_t>("header hidden_dim");
  c.layers = in.read<std::int32_t>("header n_layers");
  c.heads = in.read<std::int32_t>("header n_heads");
  c.kv_heads = in.read<std::int32_t>("header n_kv_heads");
  const std::int32_t vocab = in.read<std::int32_t>("header vocab_size");
  c.seq_len = in.read<std::int32_t>("header seq_len");
  const bool shared_classifier = vocab > 0;
  c.vocab_size = vocab > 0 ? vocab : (vocab == INT32_MIN ? 0 : -vocab);
  validate_llama_config(c, path);

  // Expected size, computed in 64 bits before anything is allocated.
  const auto dim = static_cast<std::uint64_t>(c.dim), hidden = static_cast<std::uint64_t>(c.hidden_dim);
  const auto layers = static_cast<std::uint64_t>(c.layers), kv_dim = static_cast<std::uint64_t>(c.kv_dim());
  const auto vocab_n = static_cast<std::uint64_t>(c.vocab_size), seq = static_cast<std::uint64_t>(c.seq_len);
  const std::uint64_t head = dim / static_cast<std::uint64_t>(c.heads);
  std::uint64_t floats = vocab_n * dim + layers * (2 * dim + 2 * dim * dim + 2 * kv_dim * dim + 3 * hidden * dim) + dim +
                         seq * head;  // freq_cis_real + freq_cis_imag: seq x head/2 each
  if (!shared_classifier) floats += vocab_n * dim;
  const std::uint64_t expected = 28 + floats * 4;
  if (bytes.size() != expected) {
    std::string where_it_ends;
    if (bytes.size() < expected) {
      // The array the file ends in, with its offsets, so a cut download can be told from a
      // header that does not describe the data.
      const std::pair<const char*, std::uint64_t> arrays[] = {
          {"token_embedding", vocab_n * dim}, {"rms_att", layers * dim},         {"wq", layers * dim * dim},
          {"wk", layers * kv_dim * dim},      {"wv", layers * kv_dim * dim},     {"wo", layers * dim * dim},
          {"rms_ffn", layers * dim},          {"w1", layers * hidden * dim},     {"w2", layers * dim * hidden},
          {"w3", layers * hidden * dim},      {"rms_final", dim},                {"freq_cis tables", seq * head},
          {"wcls", shared_classifier ? 0 : vocab_n * dim}};
      std::uint64_t start = 28;
      where_it_ends = " (truncated: the header ends at offset 28)";
      for (const auto& [name, count] : arrays) {
        const std::uint64_t end = start + count * 4;
        if (bytes.size() >= start && bytes.size() < end) {
          where_it_ends = " (truncated: it ends at offset " + std::to_string(bytes.size()) + ", inside " + name + ", offsets " +
                          std::to_string(start) + ".." + std::to_string(end) + ")";
          break;
        }
        start = end;
      }
    } else {
      where_it_ends = " (trailing data: " + std::to_string(bytes.size() - expected) + " bytes after offset " + std::to_string(expected) + ")";
    }
    throw InputError(path, "size",
                     "a llama2.c checkpoint with this header has " + std::to_string(expected) + " bytes, the file has " +
                         std::to_string(bytes.size()) + where_it_ends);
  }
  auto read = [&](std::vector<float>& v, std::uint64_t count, const char* what) {
    v.resize(count);
    in.read_floats(v.data(), count, what);
  };
  auto read_matrix = [&](DenseMatrix& m, std::uint64_t rows, std::uint64_t cols, const char* what) {
    std::vector<float> v;
    read(v, rows * cols, what);
    m = DenseMatrix::from_f32(v, static_cast<int>(cols));
  };
  read(w.token_embedding, vocab_n * dim, "token_embedding");
  read(w.rms_att, layers * dim, "rms_att");
  read_matrix(w.wq, layers * dim, dim, "wq");
  read_matrix(w.wk, layers * kv_dim, dim, "wk");
  read_matrix(w.wv, layers * kv_dim, dim, "wv");
  read_matrix(w.wo, layers * dim, dim, "wo");
  read(w.rms_ffn, layers * dim, "rms_ffn");
  read_matrix(w.w1, layers * hidden, dim, "w1");
  read_matrix(w.w2, layers * dim, hidden, "w2");
  read_matrix(w.w3, layers * hidden, dim, "w3");
  read(w.rms_final, dim, "rms_final");
  in.seek(in.offset() + seq * head * 4, "freq_cis tables");  // not used: RoPE is computed
  if (shared_classifier) {
    w.wcls = DenseMatrix::from_f32(w.token_embedding, c.dim);
  } else {
    read_matrix(w.wcls, vocab_n, dim, "wcls");
  }
  return w;
}

}  // namespace kv
