#include "model/gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/byte_reader.h"
#include "quant/fp16.h"
#include "runtime/error.h"

namespace kv {

namespace {

constexpr std::uint32_t kMagic = 0x46554747;  // "GGUF" little-endian
constexpr std::uint64_t kMaxTensors = 1 << 20;
constexpr std::uint64_t kMaxKeys = 1 << 20;
constexpr std::uint64_t kMaxElements = 1ull << 40;
constexpr std::size_t kQ8Block = 32;
struct Q8Block {
  std::uint16_t scale;  // f16
  std::int8_t values[kQ8Block];
};
static_assert(sizeof(Q8Block) == 34, "GGML Q8_0 block: f16 scale + 32 int8");

std::string read_gguf_string(ByteReader& in, const char* what) {
  const auto length = in.read<std::uint64_t>(what);
  if (length > in.remaining()) in.fail(std::string(what) + " length " + std::to_string(length) + " runs past the end of the file");
  return in.read_string(static_cast<std::size_t>(length), what);
}

std::size_t scalar_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::U8: case GgufValueType::I8: case GgufValueType::Bool: return 1;
    case GgufValueType::U16: case GgufValueType::I16: return 2;
    case GgufValueType::U32: case GgufValueType::I32: case GgufValueType::F32: return 4;
    case GgufValueType::U64: case GgufValueType::I64: case GgufValueType::F64: return 8;
    default: return 0;
  }
}

double read_scalar(ByteReader& in, GgufValueType type, const char* what) {
  switch (type) {
    case GgufValueType::U8: return in.read<std::uint8_t>(what);
    case GgufValueType::I8: return in.read<std::int8_t>(what);
    case GgufValueType::Bool: return in.read<std::uint8_t>(what) != 0 ? 1.0 : 0.0;
    case GgufValueType::U16: return in.read<std::uint16_t>(what);
    case GgufValueType::I16: return in.read<std::int16_t>(what);
    case GgufValueType::U32: return in.read<std::uint32_t>(what);
    case GgufValueType::I32: return in.read<std::int32_t>(what);
    case GgufValueType::F32: return in.read<float>(what);
    case GgufValueType::U64: return static_cast<double>(in.read<std::uint64_t>(what));
    case GgufValueType::I64: return static_cast<double>(in.read<std::int64_t>(what));
    case GgufValueType::F64: return in.read<double>(what);
    default: in.fail("not a scalar type");
  }
}

GgufValue read_value(ByteReader& in, const std::string& key) {
  GgufValue value;
  const auto raw_type = in.read<std::uint32_t>("value type");
  value.type = static_cast<GgufValueType>(raw_type);
  if (value.type == GgufValueType::String) {
    value.text = read_gguf_string(in, "string value");
  } else if (value.type == GgufValueType::Array) {
    value.element = static_cast<GgufValueType>(in.read<std::uint32_t>("array element type"));
    const auto count = in.read<std::uint64_t>("array length");
    const std::size_t element_size = value.element == GgufValueType::String ? 8 : scalar_size(value.element);
    if (element_size == 0) in.fail("key " + key + ": unsupported array element type");
    if (count > in.remaining() / element_size) in.fail("key " + key + ": array of " + std::to_string(count) + " runs past the end of the file");
    if (value.element == GgufValueType::String) {
      value.strings.reserve(static_cast<std::size_t>(count));
      for (std::uint64_t i = 0; i < count; ++i) value.strings.push_back(read_gguf_string(in, "array string"));
    } else {
      value.numbers.reserve(static_cast<std::size_t>(count));
      for (std::uint64_t i = 0; i < count; ++i) value.numbers.push_back(read_scalar(in, value.element, "array element"));
    }
  } else if (scalar_size(value.type) > 0) {
    value.number = read_scalar(in, value.type, "scalar value");
  } else {
    in.fail("key " + key + ": unknown value type " + std::to_string(raw_type));
  }
  return value;
}

std::uint64_t tensor_bytes(const GgufTensorInfo& t, ByteReader& in) {
  switch (t.type) {
    case GgmlType::F32: return t.elements * 4;
    case GgmlType::F16:
    case GgmlType::BF16: return t.elements * 2;
    case GgmlType::Q8_0:
      if (t.ne[0] % kQ8Block != 0) in.fail("tensor " + t.name + ": Q8_0 rows must be a multiple of 32");
      return t.elements / kQ8Block * sizeof(Q8Block);
  }
  in.fail("tensor " + t.name + ": unsupported type " + std::to_string(static_cast<std::uint32_t>(t.type)) +
          " (supported: F32, F16, BF16, Q8_0)");
}

GgufTensorInfo read_tensor_info(ByteReader& in) {
  GgufTensorInfo t;
  t.name = read_gguf_string(in, "tensor name");
  const auto dims = in.read<std::uint32_t>("tensor n_dims");
  if (dims < 1 || dims > 4) in.fail("tensor " + t.name + ": n_dims " + std::to_string(dims) + " is outside 1..4");
  t.elements = 1;
  for (std::uint32_t d = 0; d < dims; ++d) {
    const auto n = in.read<std::uint64_t>("tensor ne");
    if (n == 0 || n > kMaxElements || t.elements > kMaxElements / n) {
      in.fail("tensor " + t.name + ": absurd shape (ne[" + std::to_string(d) + "] = " + std::to_string(n) + ")");
    }
    t.ne.push_back(n);
    t.elements *= n;
  }
  const auto type = in.read<std::uint32_t>("tensor type");
  t.type = static_cast<GgmlType>(type);
  t.offset = in.read<std::uint64_t>("tensor offset");
  t.bytes = tensor_bytes(t, in);
  return t;
}

}  // namespace

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata.find(key);
  return it == metadata.end() ? nullptr : &it->second;
}

const GgufTensorInfo* GgufFile::tensor(const std::string& name) const {
  for (const GgufTensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

GgufFile read_gguf(const std::string& path) { return parse_gguf(read_file(path), path); }

GgufFile parse_gguf(std::vector<std::byte> bytes, const std::string& path) {
  GgufFile file;
  file.path = path;
  file.bytes = std::move(bytes);
  ByteReader in(file.bytes, path);
  if (in.read<std::uint32_t>("magic") != kMagic) throw InputError(path, "offset 0", "not a GGUF file (bad magic)");
  file.version = in.read<std::uint32_t>("version");
  if (file.version != 2 && file.version != 3) {
    throw InputError(path, "version", "GGUF version " + std::to_string(file.version) + " is not supported (2 or 3)");
  }
  const auto tensor_count = in.read<std::uint64_t>("tensor count");
  const auto kv_count = in.read<std::uint64_t>("metadata count");
  if (tensor_count > kMaxTensors || kv_count > kMaxKeys) in.fail("absurd tensor or metadata count");
  for (std::uint64_t i = 0; i < kv_count; ++i) {
    std::string key = read_gguf_string(in, "metadata key");
    GgufValue value = read_value(in, key);
    file.metadata[std::move(key)] = std::move(value);
  }
  if (const GgufValue* align = file.find("general.alignment")) {
    const auto a = static_cast<std::uint64_t>(align->number);
    if (align->type == GgufValueType::Array || align->type == GgufValueType::String || a == 0 || (a & (a - 1)) != 0 || a > 65536) {
      throw InputError(path, "general.alignment", "must be a power of two up to 65536");
    }
    file.alignment = a;
  }
  for (std::uint64_t i = 0; i < tensor_count; ++i) file.tensors.push_back(read_tensor_info(in));
  file.data_offset = (in.offset() + file.alignment - 1) / file.alignment * file.alignment;
  for (const GgufTensorInfo& t : file.tensors) {
    if (t.offset % file.alignment != 0) {
      throw InputError(path, "tensor " + t.name, "offset " + std::to_string(t.offset) + " is not aligned");
    }
    if (file.data_offset > file.bytes.size() || t.offset > file.bytes.size() - file.data_offset ||
        t.bytes > file.bytes.size() - file.data_offset - t.offset) {
      throw InputError(path, "tensor " + t.name,
                       "data [" + std::to_string(t.offset) + ", +" + std::to_string(t.bytes) + ") runs past the end of the file");
    }
  }
  return file;
}

namespace {
std::string join_shape(const std::vector<std::uint64_t>& ne) {
  std::string text;
  for (std::size_t i = 0; i < ne.size(); ++i) {
    if (i > 0) text.push_back(',');
    text.append(std::to_string(ne[i]));
  }
  return text;
}
}  // namespace

std::vector<float> GgufFile::read_tensor(const std::string& name, const std::vector<std::uint64_t>& expected_ne) const {
  const GgufTensorInfo* t = tensor(name);
  if (t == nullptr) throw InputError(path, "tensor " + name, "missing");
  if (t->ne != expected_ne) {
    throw InputError(path, "tensor " + name, "shape [" + join_shape(t->ne) + "], expected [" + join_shape(expected_ne) + "]");
  }
  const std::byte* data = bytes.data() + data_offset + t->offset;
  std::vector<float> out(static_cast<std::size_t>(t->elements));
  switch (t->type) {
    case GgmlType::F32: std::memcpy(out.data(), data, out.size() * sizeof(float)); break;
    case GgmlType::F16:
      for (std::size_t i = 0; i < out.size(); ++i) {
        std::uint16_t h;
        std::memcpy(&h, data + 2 * i, 2);
        out[i] = f16_to_f32(h);
      }
      break;
    case GgmlType::BF16:
      for (std::size_t i = 0; i < out.size(); ++i) {
        std::uint16_t b;
        std::memcpy(&b, data + 2 * i, 2);
        const std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
        std::memcpy(&out[i], &bits, 4);
      }
      break;
    case GgmlType::Q8_0:
      for (std::size_t block = 0; block < out.size() / kQ8Block; ++block) {
        Q8Block q;
        std::memcpy(&q, data + block * sizeof(Q8Block), sizeof(Q8Block));
        const float scale = f16_to_f32(q.scale);
        for (std::size_t j = 0; j < kQ8Block; ++j) out[block * kQ8Block + j] = scale * static_cast<float>(q.values[j]);
      }
      break;
  }
  for (float x : out) {
    if (!std::isfinite(x)) throw InputError(path, "tensor " + name, "holds a non-finite value");
  }
  return out;
}

DenseMatrix GgufFile::read_matrix(const std::string& name, const std::vector<std::uint64_t>& expected_ne) const {
  std::vector<float> values = read_tensor(name, expected_ne);  // shape, type and finiteness checked
  const GgufTensorInfo* t = tensor(name);
  const auto rows = expected_ne.size() > 1 ? static_cast<std::size_t>(expected_ne[1]) : 1;
  const auto cols = static_cast<int>(expected_ne[0]);
  const std::byte* data = bytes.data() + data_offset + t->offset;
  switch (t->type) {
    case GgmlType::F16:
      return DenseMatrix(DenseFormat::F16, rows, cols, std::vector<std::byte>(data, data + rows * dense_row_bytes(DenseFormat::F16, cols)));
    case GgmlType::Q8_0:
      return DenseMatrix(DenseFormat::Q8, rows, cols, std::vector<std::byte>(data, data + rows * dense_row_bytes(DenseFormat::Q8, cols)));
    case GgmlType::F32:
    case GgmlType::BF16: break;
  }
  return DenseMatrix::from_f32(values, cols);
}

namespace {

// Layer matrices stacked in one format: theirs when they share it, else f32.
DenseMatrix stack_layers(const std::vector<DenseMatrix>& layers) {
  if (layers.empty()) return {};
  const bool same = std::all_of(layers.begin(), layers.end(), [&](const DenseMatrix& m) { return m.format() == layers[0].format(); });
  std::size_t rows = 0;
  for (const DenseMatrix& m : layers) rows += m.rows();
  if (same) {
    std::vector<std::byte> bytes;
    bytes.reserve(rows * dense_row_bytes(layers[0].format(), layers[0].cols()));
    for (const DenseMatrix& m : layers) bytes.insert(bytes.end(), m.bytes().begin(), m.bytes().end());
    return DenseMatrix(layers[0].format(), rows, layers[0].cols(), std::move(bytes));
  }
  std::vector<float> values;
  for (const DenseMatrix& m : layers) {
    const std::vector<float> v = m.to_f32();
    values.insert(values.end(), v.begin(), v.end());
  }
  return DenseMatrix::from_f32(values, layers[0].cols());
}

double required_number(const GgufFile& f, const std::string& key) {
  const GgufValue* v = f.find(key);
  if (v == nullptr) throw InputError(f.path, key, "missing");
  if (v->type == GgufValueType::String || v->type == GgufValueType::Array) throw InputError(f.path, key, "not a number");
  return v->number;
}

double optional_number(const GgufFile& f, const std::string& key, double fallback) {
  return f.find(key) != nullptr ? required_number(f, key) : fallback;
}

int as_int(const GgufFile& f, const std::string& key, double value) {
  if (!(value >= 0.0 && value <= 2147483647.0) || value != std::floor(value)) {
    throw InputError(f.path, key, "not a valid count");
  }
  return static_cast<int>(value);
}

Tokenizer gguf_tokenizer(const GgufFile& f) {
  const GgufValue* model = f.find("tokenizer.ggml.model");
  if (model == nullptr || model->text != "llama") {
    throw InputError(f.path, "tokenizer.ggml.model", "only the SentencePiece 'llama' vocabulary is supported");
  }
  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  const GgufValue* scores = f.find("tokenizer.ggml.scores");
  if (tokens == nullptr || tokens->element != GgufValueType::String || tokens->strings.empty()) {
    throw InputError(f.path, "tokenizer.ggml.tokens", "missing or not an array of strings");
  }
  if (scores == nullptr || scores->numbers.size() != tokens->strings.size()) {
    throw InputError(f.path, "tokenizer.ggml.scores", "missing or not one score per token");
  }
  std::vector<std::string> pieces;
  pieces.reserve(tokens->strings.size());
  const std::string marker = "\xE2\x96\x81";  // U+2581, SentencePiece's space
  for (const std::string& raw : tokens->strings) {
    std::string piece;
    for (std::size_t i = 0; i < raw.size();) {
      if (raw.compare(i, marker.size(), marker) == 0) {
        piece += ' ';
        i += marker.size();
      } else {
        piece += raw[i++];
      }
    }
    pieces.push_back(std::move(piece));
  }
  std::vector<float> piece_scores(scores->numbers.begin(), scores->numbers.end());
  const int bos = as_int(f, "tokenizer.ggml.bos_token_id", optional_number(f, "tokenizer.ggml.bos_token_id", 1));
  const int eos = as_int(f, "tokenizer.ggml.eos_token_id", optional_number(f, "tokenizer.ggml.eos_token_id", 2));
  return Tokenizer(std::move(pieces), std::move(piece_scores), bos, eos, f.path);
}

}  // namespace

GgufModel load_gguf_llama(const std::string& path) { return llama_from_gguf(read_gguf(path)); }

GgufModel llama_from_gguf(const GgufFile& f) {
  const std::string& path = f.path;
  const GgufValue* arch = f.find("general.architecture");
  if (arch == nullptr || arch->text != "llama") {
    throw InputError(path, "general.architecture", "'" + (arch ? arch->text : std::string()) + "' is not supported (llama)");
  }
  GgufModel model;
  model.version = f.version;
  model.tokenizer = gguf_tokenizer(f);
  LlamaConfig& c = model.weights.config;
  c.dim = as_int(f, "llama.embedding_length", required_number(f, "llama.embedding_length"));
  c.hidden_dim = as_int(f, "llama.feed_forward_length", required_number(f, "llama.feed_forward_length"));
  c.layers = as_int(f, "llama.block_count", required_number(f, "llama.block_count"));
  c.heads = as_int(f, "llama.attention.head_count", required_number(f, "llama.attention.head_count"));
  c.kv_heads = as_int(f, "llama.attention.head_count_kv", optional_number(f, "llama.attention.head_count_kv", c.heads));
  c.seq_len = as_int(f, "llama.context_length", required_number(f, "llama.context_length"));
  c.rope_theta = static_cast<float>(optional_number(f, "llama.rope.freq_base", 10000.0));
  c.norm_eps = static_cast<float>(optional_number(f, "llama.attention.layer_norm_rms_epsilon", 1e-5));
  c.vocab_size = model.tokenizer.vocab_size();
  validate_llama_config(c, path);
  if (f.find("llama.rope.dimension_count") != nullptr &&
      as_int(f, "llama.rope.dimension_count", required_number(f, "llama.rope.dimension_count")) != c.head_dim()) {
    throw InputError(path, "llama.rope.dimension_count", "partial rotary embeddings are not supported");
  }

  const auto dim = static_cast<std::uint64_t>(c.dim), hidden = static_cast<std::uint64_t>(c.hidden_dim);
  const auto kv_dim = static_cast<std::uint64_t>(c.kv_dim()), vocab = static_cast<std::uint64_t>(c.vocab_size);
  LlamaWeights& w = model.weights;
  w.token_embedding = f.read_tensor("token_embd.weight", {dim, vocab});
  w.rms_final = f.read_tensor("output_norm.weight", {dim});
  w.wcls = f.read_matrix(f.tensor("output.weight") != nullptr ? "output.weight" : "token_embd.weight", {dim, vocab});
  auto append = [&](std::vector<float>& dst, const std::string& name, std::vector<std::uint64_t> ne) {
    const std::vector<float> t = f.read_tensor(name, ne);
    dst.insert(dst.end(), t.begin(), t.end());
  };
  std::vector<DenseMatrix> wq, wk, wv, wo, w1, w2, w3;
  auto append_matrix = [&](std::vector<DenseMatrix>& dst, const std::string& name, std::vector<std::uint64_t> ne) {
    dst.push_back(f.read_matrix(name, ne));
  };
  for (int l = 0; l < c.layers; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    append(w.rms_att, blk + "attn_norm.weight", {dim});
    append_matrix(wq, blk + "attn_q.weight", {dim, dim});
    append_matrix(wk, blk + "attn_k.weight", {dim, kv_dim});
    append_matrix(wv, blk + "attn_v.weight", {dim, kv_dim});
    append_matrix(wo, blk + "attn_output.weight", {dim, dim});
    append(w.rms_ffn, blk + "ffn_norm.weight", {dim});
    append_matrix(w1, blk + "ffn_gate.weight", {dim, hidden});
    append_matrix(w2, blk + "ffn_down.weight", {hidden, dim});
    append_matrix(w3, blk + "ffn_up.weight", {dim, hidden});
  }
  w.wq = stack_layers(wq);
  w.wk = stack_layers(wk);
  w.wv = stack_layers(wv);
  w.wo = stack_layers(wo);
  w.w1 = stack_layers(w1);
  w.w2 = stack_layers(w2);
  w.w3 = stack_layers(w3);
  return model;
}

}  // namespace kv
