// The exact reference attention: dense, causal, GQA, accumulated in double. Everything else
// (paged kernels, sparse selection, offload) is tested against this.
#pragma once

#include <vector>

#include "quant/page_layout.h"

namespace kv {

struct AttentionShape {
  int q_heads = 0;
  int kv_heads = 0;
  int head_dim = 0;
  float scale = 0.0f;  // softmax scale applied to q.k (usually 1/sqrt(head_dim))

  int group() const { return q_heads / kv_heads; }
};

// q: [n_queries][q_heads][head_dim] for positions ctx-n_queries .. ctx-1; query i sees
// tokens 0 .. ctx-n_queries+i. k, v: [ctx][kv_heads][head_dim]. out like q.
void attention_ref(const AttentionShape& shape, const float* q, int n_queries, const float* k, const float* v, int ctx,
                   float* out);

// Dense F32 K and V [ctx][kv_heads][head_dim] gathered from paged storage with the reference
// dequantizer: pages[h] lists kv head h's pages in logical order.
struct DenseKV {
  std::vector<float> k;
  std::vector<float> v;
  int ctx = 0;
};
DenseKV gather_pages_ref(const AttentionShape& shape, const std::vector<std::vector<PageView>>& pages);

}  // namespace kv
