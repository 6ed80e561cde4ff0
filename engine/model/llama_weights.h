// Weights of a llama-architecture transformer, in llama2.c's layout: matrices row-major
// [out][in] (y[i] = sum_j W[i][j] x[j]), per-layer arrays stacked over layers.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "model/dense.h"

namespace kv {

struct LlamaConfig {
  int dim = 0;         // model width
  int hidden_dim = 0;  // FFN width
  int layers = 0;
  int heads = 0;
  int kv_heads = 0;
  int vocab_size = 0;
  int seq_len = 0;     // trained context
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;

  int head_dim() const { return heads > 0 ? dim / heads : 0; }
  int kv_dim() const { return heads > 0 ? dim / heads * kv_heads : 0; }
};

// Throws InputError naming `where` for an impossible or absurd configuration.
void validate_llama_config(const LlamaConfig& config, const std::string& where);

// The matrices multiplied by dense layers keep the format they were stored in (f32 from llama2.c
// checkpoints; f32, f16 or q8 from GGUF); norms and the embedding table are f32.
struct LlamaWeights {
  LlamaConfig config;
  std::vector<float> token_embedding;  // [vocab][dim]
  std::vector<float> rms_att;          // [layers][dim]
  DenseMatrix wq;  // [layers][dim][dim]
  DenseMatrix wk;  // [layers][kv_dim][dim]
  DenseMatrix wv;  // [layers][kv_dim][dim]
  DenseMatrix wo;  // [layers][dim][dim]
  std::vector<float> rms_ffn;          // [layers][dim]
  DenseMatrix w1;  // [layers][hidden][dim]
  DenseMatrix w2;  // [layers][dim][hidden]
  DenseMatrix w3;  // [layers][hidden][dim]
  std::vector<float> rms_final;        // [dim]
  DenseMatrix wcls;                    // [vocab][dim]; the embedding's values when shared
};

// llama2.c checkpoint (legacy version 0: 7 int32 header, then fp32 arrays; a negative
// vocab_size means the classifier is stored separately). Throws InputError naming the file.
LlamaWeights load_llama2c(const std::string& path);
// The same from bytes in memory; `name` is used in error messages (fuzzing, tests).
LlamaWeights parse_llama2c(const std::vector<std::byte>& bytes, const std::string& name);

}  // namespace kv
