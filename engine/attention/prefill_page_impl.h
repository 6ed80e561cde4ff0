// Chunked-prefill page kernel, written once and compiled into every ISA's translation unit
// with that unit's flags (the compiler vectorises the dot and axpy loops). Everything here has
// internal linkage on purpose: an inline function with external linkage would let the linker
// pick the AVX2 copy for the scalar path.
//
// The page is dequantized once into scratch (amortised over all queries and q heads of the
// chunk), then each query folds the tokens it may see (causal) into its state.
#pragma once

#include <algorithm>
#include <cmath>

#include "attention/page_kernels.h"
#include "attention/softmax_state.h"
#include "quant/quantizer.h"

namespace kv {
namespace {

// Eight independent partial sums: without them the float reduction is one serial chain of
// FMAs (the compiler may not reorder it), which made prefill ~7x slower per MAC than decode.
float prefill_dot(const float* a, const float* b, int n) {
  float lanes[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) lanes[j] += a[i + j] * b[i + j];
  }
  float sum = ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void prefill_axpy(float w, const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] += w * x[i];
}

void prefill_page_impl(const PrefillPageArgs& args) {
  const PageView& page = args.page;
  const int dim = page.layout->head_dim;
  const auto row = static_cast<std::size_t>(dim);
  float* k = args.scratch;
  float* v = args.scratch + static_cast<std::size_t>(page.layout->page_tokens) * row;
  dequantize_page_ref(page, k, v);
  float scores[kMaxPageTokens];
  for (int i = 0; i < args.n_queries; ++i) {
    const int visible = std::min(page.tokens, args.first_query_pos + i - args.first_token_pos + 1);
    if (visible <= 0) continue;
    for (int g = 0; g < args.group; ++g) {
      const std::size_t slot = static_cast<std::size_t>(i) * static_cast<std::size_t>(args.group) + static_cast<std::size_t>(g);
      const float* q = args.q + slot * row;
      SoftmaxState state(args.states + slot * SoftmaxState::stride(dim), dim);
      float page_max = -INFINITY;
      for (int t = 0; t < visible; ++t) {
        scores[t] = prefill_dot(q, k + t * row, dim);
        page_max = std::max(page_max, scores[t]);
      }
      const float new_max = std::max(state.max(), page_max);
      const float rescale = state.empty() ? 0.0f : std::exp(state.max() - new_max);
      float* out = state.out();
      for (int c = 0; c < dim; ++c) out[c] *= rescale;
      float total = state.sum() * rescale;
      for (int t = 0; t < visible; ++t) {
        const float p = std::exp(scores[t] - new_max);
        total += p;
        prefill_axpy(p, v + t * row, out, dim);
      }
      state.sum() = total;
      state.max() = new_max;
    }
  }
}

}  // namespace
}  // namespace kv
