// The llama transformer forward pass (llama2.c run.c semantics): token embedding, RMSNorm,
// RoPE on adjacent pairs, GQA attention through the KV cache, SwiGLU MLP, final norm and
// classifier. Matrix products run on a thread pool.
#pragma once

#include <memory>
#include <vector>

#include "model/backend.h"
#include "model/llama_weights.h"
#include "runtime/thread_pool.h"

namespace kv {

class LlamaModel : public ModelBackend {
 public:
  // max_seq: the positions a sequence may reach (often the trained seq_len).
  LlamaModel(std::shared_ptr<const LlamaWeights> weights, int max_seq, ThreadPool& pool);

  const ModelGeometry& geometry() const override { return geometry_; }
  void begin_step(const int* tokens, int n_tokens, int pos) override;
  void layer_qkv(int layer, float* q, float* k, float* v) override;
  void layer_output(int layer, const float* attn) override;
  bool attention_feeds_next_layer() const override { return true; }

  // After run_step: logits [n_tokens][vocab] of the step's tokens (final norm + classifier).
  const std::vector<float>& logits();
  // The logits the last logits() call computed.
  const std::vector<float>& last_logits() const { return logits_; }
  int vocab_size() const { return weights_->config.vocab_size; }
  const LlamaWeights& weights() const { return *weights_; }

 private:
  // x [n][in] times layer `layer` of the stacked matrix w (out_dim rows a layer).
  void matmul(const float* x, int n, const DenseMatrix& w, std::size_t layer, int out_dim, float* y);
  void rope(float* vec, int heads, int pos) const;

  std::shared_ptr<const LlamaWeights> weights_;
  ModelGeometry geometry_;
  ThreadPool& pool_;
  std::vector<float> rope_freq_;  // [head_dim / 2]
  int n_ = 0;
  int pos_ = 0;
  std::vector<float> x_, xb_, xb2_, hb_, hb2_, logits_;
};

// The plain dense reference forward pass, independent of the KV cache and the engine's kernels:
// every position's K and V kept in F32 arrays, attention by attention_ref. Returns logits
// [tokens][vocab]. Tests compare the paged F32 path against it.
std::vector<float> reference_forward(const LlamaWeights& weights, const std::vector<int>& tokens);

// Greedy decoding from a prompt of token ids (the prompt's first token is usually BOS).
// run.c semantics: `steps` forward passes from position 0; returns the token chosen after
// each (the prompt's own tokens are echoed while the prompt lasts); stops early when the
// next token is BOS (id 1).
std::vector<int> generate_greedy(LlamaModel& model, KVCache& cache, const std::vector<int>& prompt, int steps);

}  // namespace kv
