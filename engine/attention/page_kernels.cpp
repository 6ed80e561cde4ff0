#include "attention/page_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "attention/int_dot.h"
#include "attention/softmax_state.h"
#include "quant/codes.h"
#include "quant/fp16.h"
#include "quant/quantizer.h"
#include "runtime/error.h"

namespace kv {

const PageKernels& page_kernels(Isa isa) {
  static const PageKernels scalar_kernels{Isa::Scalar, &scalar::decode_page, &scalar::prefill_page, &scalar::page_bounds};
#if defined(__x86_64__)
  static const PageKernels avx2_kernels{Isa::Avx2, &avx2::decode_page, &avx2::prefill_page, &avx2::page_bounds};
  static const PageKernels avx512_kernels{Isa::Avx512, &avx512::decode_page, &avx512::prefill_page, &avx512::page_bounds};
#elif defined(__aarch64__)
  static const PageKernels neon_kernels{Isa::Neon, &neon::decode_page, &neon::prefill_page, &neon::page_bounds};
  static const PageKernels dotprod_kernels{Isa::Dotprod, &dotprod::decode_page, &neon::prefill_page, &neon::page_bounds};
  static const PageKernels i8mm_kernels{Isa::I8mm, &i8mm::decode_page, &neon::prefill_page, &neon::page_bounds};
#endif
  KV_ASSERT(isa != Isa::Auto && isa_supported(isa), "page_kernels needs a resolved, supported ISA");
  switch (isa) {
#if defined(__x86_64__)
    case Isa::Avx2: return avx2_kernels;
    case Isa::Avx512: return avx512_kernels;
#elif defined(__aarch64__)
    case Isa::Neon: return neon_kernels;
    case Isa::Dotprod: return dotprod_kernels;
    case Isa::I8mm: return i8mm_kernels;
#endif
    default: return scalar_kernels;
  }
}

float page_bound_ref(const PageView& page, const float* q, int group) {
  return page_bound_ref(page.key_min(), page.key_max(), page.layout->head_dim, q, group);
}

float page_bound_ref(const std::uint16_t* lo, const std::uint16_t* hi, int head_dim, const float* q, int group) {
  double best = -INFINITY;
  for (int g = 0; g < group; ++g) {
    const float* qg = q + static_cast<std::size_t>(g) * head_dim;
    double bound = 0.0;
    for (int c = 0; c < head_dim; ++c) {
      bound += std::max(static_cast<double>(qg[c]) * f16_to_f32(lo[c]), static_cast<double>(qg[c]) * f16_to_f32(hi[c]));
    }
    best = std::max(best, bound);
  }
  return static_cast<float>(best);
}

namespace {

// Both references: floats folded in double precision, or, where `paths` says so, the integers
// of the SIMD kernels (int_dot.h).
void decode_page_reference(const PageView& page, const float* q, int group, float* states, float* page_lse,
                           IntDotPaths paths, float* v_quantum) {
  const PageLayout& layout = *page.layout;
  const int dim = layout.head_dim;
  const auto row = static_cast<std::size_t>(dim);
  std::vector<float> k(static_cast<std::size_t>(page.tokens) * row);
  std::vector<float> v(k.size());
  dequantize_page_ref(page, k.data(), v.data());
  std::vector<double> scores(static_cast<std::size_t>(page.tokens));
  for (int g = 0; g < group; ++g) {
    SoftmaxState state(states + g * SoftmaxState::stride(dim), dim);
    const float* qg = q + g * row;
    if (v_quantum != nullptr) v_quantum[g] = 0.0f;
    if (page.tokens == 0) {
      if (page_lse != nullptr) page_lse[g] = -INFINITY;
      continue;
    }
    if (paths.k) {  // int8 query against the codes, as the kernel rounds it
      const float* k_scale = layout.at<float>(page.data, layout.k_scale);
      const float* k_zero = layout.at<float>(page.data, layout.k_zero);
      std::vector<float> folded(row);
      double bias = 0.0;
      float amax = 0.0f;
      for (int c = 0; c < dim; ++c) {
        folded[c] = qg[c] * k_scale[c];
        bias += static_cast<double>(qg[c]) * k_zero[c];
        amax = std::max(amax, std::fabs(folded[c]));
      }
      const float code_max = query_code_max(layout.k_format);
      const float inv = amax > 0.0f ? code_max / amax : 0.0f;
      std::vector<long> q8(row);
      for (int c = 0; c < dim; ++c) q8[c] = std::lrint(folded[c] * inv);
      for (int t = 0; t < page.tokens; ++t) {
        const std::uint8_t* codes = layout.k_row(page.data, t);
        long dot = 0;
        for (int c = 0; c < dim; ++c) dot += q8[c] * load_code(codes, c, layout.k_format, dim);
        scores[t] = static_cast<double>(dot) * (amax / code_max) + bias;
      }
    } else {
      for (int t = 0; t < page.tokens; ++t) {
        double dot = 0.0;
        for (int c = 0; c < dim; ++c) dot += static_cast<double>(qg[c]) * k[t * row + c];
        scores[t] = dot;
      }
    }
    const double page_max = *std::max_element(scores.begin(), scores.end());
    std::vector<float> partial(SoftmaxState::stride(dim));
    SoftmaxState page_state(partial.data(), dim);
    double total = 0.0;
    std::vector<double> acc(row, 0.0);
    std::vector<double> p(static_cast<std::size_t>(page.tokens));
    for (int t = 0; t < page.tokens; ++t) {
      p[t] = std::exp(scores[t] - page_max);
      total += p[t];
    }
    if (paths.v) {  // 7-bit weights per V group against the codes, as the kernel rounds them
      const auto* bits = layout.at<std::uint16_t>(page.data, layout.v_scale);
      const int groups = layout.v_groups();
      std::vector<float> pf(p.begin(), p.end());  // the kernel's numerators are floats
      float p_sum = 0.0f, p_max = 0.0f;
      for (float x : pf) {
        p_sum += x;
        p_max = std::max(p_max, x);
      }
      const float midpoint = v_code_midpoint(layout.v_format);
      const float head_scale = weight_head_scale(p_sum, p_max, page.tokens);
      const float head_inverse = weight_inverse(head_scale);
      for (int grp = 0; grp < groups; ++grp) {
        float max_vs = 0.0f;
        for (int t = 0; t < page.tokens; ++t) max_vs = std::max(max_vs, f16_to_f32(bits[t * groups + grp]));
        const float scale = max_vs * head_scale;
        const float group_inverse = weight_inverse(max_vs);
        long weight_sum = 0;
        std::vector<long> sums(static_cast<std::size_t>(layout.v_group), 0);
        for (int t = 0; t < page.tokens; ++t) {
          const long w = std::lrint((pf[t] * head_inverse) * (f16_to_f32(bits[t * groups + grp]) * group_inverse));
          weight_sum += w;
          const std::uint8_t* codes = layout.v_row(page.data, t);
          for (int c = 0; c < layout.v_group; ++c) sums[c] += w * load_code(codes, grp * layout.v_group + c, layout.v_format, dim);
        }
        for (int c = 0; c < layout.v_group; ++c) {
          acc[grp * layout.v_group + c] = static_cast<double>(scale) * (static_cast<double>(sums[c]) - midpoint * static_cast<double>(weight_sum));
        }
        if (v_quantum != nullptr) v_quantum[g] = std::max(v_quantum[g], static_cast<float>(midpoint * scale / total));
      }
    } else {
      for (int t = 0; t < page.tokens; ++t) {
        for (int c = 0; c < dim; ++c) acc[c] += p[t] * v[t * row + c];
      }
    }
    page_state.max() = static_cast<float>(page_max);
    page_state.sum() = static_cast<float>(total);
    if (page_lse != nullptr) page_lse[g] = static_cast<float>(page_max + std::log(total));
    for (int c = 0; c < dim; ++c) page_state.out()[c] = static_cast<float>(acc[c]);
    state.merge(page_state);
  }
}

}  // namespace

void decode_page_ref(const PageView& page, const float* q, int group, float* states, float* page_lse) {
  decode_page_reference(page, q, group, states, page_lse, IntDotPaths{}, nullptr);
}

void decode_page_int_ref(Isa isa, const PageView& page, const float* q, int group, float* states, float* page_lse,
                         float* v_quantum) {
  decode_page_reference(page, q, group, states, page_lse, int_dot_paths(*page.layout, isa), v_quantum);
}

}  // namespace kv
