// A model backend produces Q, K (after RoPE) and V for each layer of a step and consumes the
// attention output; the KV cache sits in between. run_step() is the one loop that drives it:
// for each layer, qkv -> append -> attend -> output.
#pragma once

#include <cstdint>
#include <vector>

#include "geometry.h"
#include "kv_cache.h"
#include "sparse/sparse_decoder.h"

namespace kv {

class ModelBackend {
 public:
  virtual ~ModelBackend() = default;
  virtual const ModelGeometry& geometry() const = 0;
  // Starts a step of n_tokens tokens at positions pos .. pos + n_tokens - 1.
  virtual void begin_step(const int* tokens, int n_tokens, int pos) = 0;
  // q: [n][q_heads][head_dim]; k, v: [n][kv_heads][head_dim].
  virtual void layer_qkv(int layer, float* q, float* k, float* v) = 0;
  // attn: [n][q_heads][head_dim], the attention output of `layer`.
  virtual void layer_output(int layer, const float* attn) = 0;
  // False when a layer's Q/K/V do not depend on the previous layers' attention (synthetic):
  // then a step may write K/V without computing attention.
  virtual bool attention_feeds_next_layer() const = 0;
  // A hint for the following layer_qkv calls: the first `rows` query rows of the step will not
  // be read (sampled prefill attends only the last queries of a chunk), so a backend may leave
  // them unwritten. 0 (the default) asks for every row.
  virtual void skip_query_rows(int /*rows*/) {}
  // Positions 0 .. n_tokens - 1 hold `tokens`, and their K/V came from the prefix cache instead
  // of a step: a backend whose K/V depend on the tokens before them records them.
  virtual void reuse_prefix(const int* /*tokens*/, int /*n_tokens*/) {}
};

enum class StepAttention : std::uint8_t {
  Full,        // every layer attends over the cache
  AppendOnly,  // K/V are written, no attention runs (sampled prefill: the workload attends for a
               // sample of chunks and extrapolates the rest); needs !attention_feeds_next_layer()
};

// Buffers of one step, reused across steps.
struct StepBuffers {
  std::vector<float> q, k, v, attn;
};

// Runs one step of n_tokens through the backend and the cache (appending their K/V).
// `sparse`, when not null, attends decode steps (one token) through a sparse decoder, and
// prefill chunks too when its policy has sparse_prefill (else they stay dense).
void run_step(ModelBackend& model, KVCache& cache, SeqId seq, const int* tokens, int n_tokens, int pos,
              StepBuffers& buffers, StepAttention attention = StepAttention::Full, SparseDecoder* sparse = nullptr);

}  // namespace kv
