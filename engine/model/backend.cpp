#include "model/backend.h"

#include "runtime/error.h"

namespace kv {

void run_step(ModelBackend& model, KVCache& cache, SeqId seq, const int* tokens, int n_tokens, int pos,
              StepBuffers& buffers, StepAttention attention, SparseDecoder* sparse) {
  if (attention == StepAttention::AppendOnly && model.attention_feeds_next_layer()) {
    throw InputError("run_step", "attention", "append-only steps need a backend whose layers ignore attention output");
  }
  const ModelGeometry& g = model.geometry();
  KV_ASSERT(n_tokens > 0, "a step has at least one token");
  const auto n = static_cast<std::size_t>(n_tokens);
  buffers.q.resize(n * g.q_heads * g.head_dim);
  buffers.k.resize(n * g.kv_heads * g.head_dim);
  buffers.v.resize(buffers.k.size());
  buffers.attn.resize(buffers.q.size());
  model.begin_step(tokens, n_tokens, pos);
  for (int layer = 0; layer < g.layers; ++layer) {
    model.layer_qkv(layer, buffers.q.data(), buffers.k.data(), buffers.v.data());
    const CacheOutcome appended = cache.append(seq, layer, buffers.k.data(), buffers.v.data(), n_tokens);
    if (sparse != nullptr) sparse->apply(appended);
    if (attention == StepAttention::AppendOnly) continue;
    if (sparse != nullptr && n_tokens == 1) {
      sparse->attend(seq, layer, buffers.q.data(), buffers.attn.data());
    } else if (sparse != nullptr && sparse->policy().sparse_prefill) {
      sparse->prefill(seq, layer, buffers.q.data(), n_tokens, buffers.attn.data());
    } else {
      const CacheOutcome attended = cache.attend(seq, layer, buffers.q.data(), n_tokens, buffers.attn.data());
      if (sparse != nullptr) sparse->apply(attended);
    }
    model.layer_output(layer, buffers.attn.data());
  }
  if (sparse != nullptr && n_tokens == 1) sparse->end_step();
}

}  // namespace kv
