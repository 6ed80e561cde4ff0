#include "attention/page_kernels.h"

#include <cmath>
#include <vector>

#include "attention/softmax_state.h"
#include "quant/fp16.h"
#include "quant/quantizer.h"
#include "runtime/error.h"

namespace kv {

const PageKernels& page_kernels(Isa isa) {
  static const PageKernels scalar_kernels{Isa::Scalar, &scalar::decode_page, &scalar::prefill_page, &scalar::page_bound};
#if defined(__x86_64__)
  static const PageKernels avx2_kernels{Isa::Avx2, &avx2::decode_page, &avx2::prefill_page, &avx2::page_bound};
  static const PageKernels avx512_kernels{Isa::Avx512, &avx512::decode_page, &avx512::prefill_page, &avx512::page_bound};
#endif
  KV_ASSERT(isa != Isa::Auto && isa_supported(isa), "page_kernels needs a resolved, supported ISA");
  switch (isa) {
#if defined(__x86_64__)
    case Isa::Avx2: return avx2_kernels;
    case Isa::Avx512: return avx512_kernels;
#endif
    default: return scalar_kernels;
  }
}

float page_bound_ref(const PageView& page, const float* q, int group) {
  const PageLayout& layout = *page.layout;
  const std::uint16_t* lo = page.key_min();
  const std::uint16_t* hi = page.key_max();
  double best = -INFINITY;
  for (int g = 0; g < group; ++g) {
    const float* qg = q + static_cast<std::size_t>(g) * layout.head_dim;
    double bound = 0.0;
    for (int c = 0; c < layout.head_dim; ++c) {
      bound += std::max(static_cast<double>(qg[c]) * f16_to_f32(lo[c]), static_cast<double>(qg[c]) * f16_to_f32(hi[c]));
    }
    best = std::max(best, bound);
  }
  return static_cast<float>(best);
}

void decode_page_ref(const PageView& page, const float* q, int group, float* states, float* page_lse) {
  const int dim = page.layout->head_dim;
  const auto row = static_cast<std::size_t>(dim);
  std::vector<float> k(static_cast<std::size_t>(page.tokens) * row);
  std::vector<float> v(k.size());
  dequantize_page_ref(page, k.data(), v.data());
  std::vector<double> scores(static_cast<std::size_t>(page.tokens));
  for (int g = 0; g < group; ++g) {
    SoftmaxState state(states + g * SoftmaxState::stride(dim), dim);
    const float* qg = q + g * row;
    double page_max = -INFINITY;
    for (int t = 0; t < page.tokens; ++t) {
      double dot = 0.0;
      for (int c = 0; c < dim; ++c) dot += static_cast<double>(qg[c]) * k[t * row + c];
      scores[t] = dot;
      page_max = std::max(page_max, dot);
    }
    if (page.tokens == 0) {
      if (page_lse != nullptr) page_lse[g] = -INFINITY;
      continue;
    }
    // Fold as a one-page state merged into the running one.
    std::vector<float> partial(SoftmaxState::stride(dim));
    SoftmaxState page_state(partial.data(), dim);
    double total = 0.0;
    std::vector<double> acc(row, 0.0);
    for (int t = 0; t < page.tokens; ++t) {
      const double p = std::exp(scores[t] - page_max);
      total += p;
      for (int c = 0; c < dim; ++c) acc[c] += p * v[t * row + c];
    }
    page_state.max() = static_cast<float>(page_max);
    page_state.sum() = static_cast<float>(total);
    if (page_lse != nullptr) page_lse[g] = static_cast<float>(page_max + std::log(total));
    for (int c = 0; c < dim; ++c) page_state.out()[c] = static_cast<float>(acc[c]);
    state.merge(page_state);
  }
}

}  // namespace kv
