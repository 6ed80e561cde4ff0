// GGUF (versions 2 and 3) reader for llama-architecture models: metadata, tensor infos
// (ne[0] is the innermost dimension, so ne = [in, out] is llama2.c's row-major [out][in]),
// alignment (general.alignment, default 32), tensor types F32, F16, BF16 and Q8_0
// (dequantized to F32 at load) and the SentencePiece-style `llama` vocabulary.
// Every malformed input is an InputError naming the file, the offset or key, and the reason.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/dense.h"
#include "model/llama_weights.h"
#include "model/tokenizer.h"

namespace kv {

enum class GgufValueType : std::uint32_t {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, Bool = 7, String = 8, Array = 9, U64 = 10, I64 = 11,
  F64 = 12,
};

enum class GgmlType : std::uint32_t { F32 = 0, F16 = 1, Q8_0 = 8, BF16 = 30 };

// One metadata value: a number, a string, or an array of numbers or strings.
struct GgufValue {
  GgufValueType type = GgufValueType::U32;
  GgufValueType element = GgufValueType::U32;  // arrays only
  double number = 0.0;
  std::string text;
  std::vector<double> numbers;
  std::vector<std::string> strings;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<std::uint64_t> ne;  // ne[0] innermost
  GgmlType type = GgmlType::F32;
  std::uint64_t offset = 0;  // from the start of the data section
  std::uint64_t elements = 0;
  std::uint64_t bytes = 0;
};

struct GgufFile {
  std::string path;
  std::uint32_t version = 0;
  std::uint64_t alignment = 32;
  std::uint64_t data_offset = 0;
  std::map<std::string, GgufValue> metadata;
  std::vector<GgufTensorInfo> tensors;
  std::vector<std::byte> bytes;  // the whole file

  const GgufValue* find(const std::string& key) const;
  const GgufTensorInfo* tensor(const std::string& name) const;
  // The tensor's values as F32 (dequantized), checked against the expected ne.
  std::vector<float> read_tensor(const std::string& name, const std::vector<std::uint64_t>& expected_ne) const;
  // The same as a dense weight matrix (rows ne[1], cols ne[0]), F16 and Q8_0 kept in their
  // format, F32 and BF16 as f32; checked like read_tensor.
  DenseMatrix read_matrix(const std::string& name, const std::vector<std::uint64_t>& expected_ne) const;
};

GgufFile read_gguf(const std::string& path);
GgufFile parse_gguf(std::vector<std::byte> bytes, const std::string& name);

struct GgufModel {
  LlamaWeights weights;
  Tokenizer tokenizer;
  std::uint32_t version = 0;
};

// A llama-architecture GGUF as weights and tokenizer.
GgufModel load_gguf_llama(const std::string& path);
GgufModel llama_from_gguf(const GgufFile& file);

}  // namespace kv
