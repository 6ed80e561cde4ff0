// Blocked flash-attention prefill kernel, written once against a vector-traits struct V and
// compiled into every ISA's translation unit with that unit's flags. Everything has internal
// linkage on purpose: an inline function with external linkage would let the linker pick the
// AVX-512 copy for the scalar path.
//
// One call folds a page into the states of n queries x group q heads (rows, query-major). The
// page is converted to floats once per call, K transposed ([channel][token]) so that a
// register tile of R rows x NK vectors of tokens takes its scores with one broadcast of a
// query channel per row and one load of keys per vector; P.V uses a tile of R rows x ND
// vectors of channels, the output rows held in registers across the page's tokens. The causal
// mask is a per-row count of visible tokens, so only the page on the diagonal pays for it.
//
// V provides: F, kWidth, zero, load, store, set1, fmadd(a, b, c) = a * b + c, mul, add, sub, max
// and exp (e^x for x <= 0, inputs clamped so that the result is finite).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "attention/page_kernels.h"
#include "attention/softmax_state.h"

namespace kv {
namespace {

// Tokens of the transposed K, padded to whole NK x kWidth blocks (zero keys, masked scores).
inline int prefill_padded_tokens(int tokens, int block) { return (tokens + block - 1) / block * block; }

// scores[r][t0 .. t0 + NK * W) = q_r . k_t for the R rows of a tile.
template <typename V, int R, int NK>
inline void prefill_scores_block(const float* const* q, const float* kt, int padded, int dim, int t0, float* scores,
                                 int score_stride) {
  using F = typename V::F;
  constexpr int W = V::kWidth;
  F acc[R][NK];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int j = 0; j < NK; ++j) acc[r][j] = V::zero();
  }
  const float* keys = kt + t0;
  for (int c = 0; c < dim; ++c, keys += padded) {
    F k[NK];
#pragma GCC unroll 16
    for (int j = 0; j < NK; ++j) k[j] = V::load(keys + j * W);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const F qc = V::set1(q[r][c]);
#pragma GCC unroll 16
      for (int j = 0; j < NK; ++j) acc[r][j] = V::fmadd(qc, k[j], acc[r][j]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int j = 0; j < NK; ++j) V::store(scores + r * score_stride + t0 + j * W, acc[r][j]);
  }
}

// out[r][c0 .. c0 + ND * W) = out * rescale[r] + sum_t p[r][t] * v[t] over `tokens` tokens.
template <typename V, int R, int ND>
inline void prefill_values_block(float* const* out, const float* rescale, const float* p, int p_stride, const float* v,
                                 int dim, int tokens, int c0) {
  using F = typename V::F;
  constexpr int W = V::kWidth;
  F acc[R][ND];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const F s = V::set1(rescale[r]);
#pragma GCC unroll 16
    for (int j = 0; j < ND; ++j) acc[r][j] = V::mul(V::load(out[r] + c0 + j * W), s);
  }
  const float* values = v + c0;
  for (int t = 0; t < tokens; ++t, values += dim) {
    F x[ND];
#pragma GCC unroll 16
    for (int j = 0; j < ND; ++j) x[j] = V::load(values + j * W);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const F w = V::set1(p[r * p_stride + t]);
#pragma GCC unroll 16
      for (int j = 0; j < ND; ++j) acc[r][j] = V::fmadd(w, x[j], acc[r][j]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int j = 0; j < ND; ++j) V::store(out[r] + c0 + j * W, acc[r][j]);
  }
}

template <typename V, int R, int ND>
void prefill_values(float* const* out, const float* rescale, const float* p, int p_stride, const float* v, int dim,
                    int tokens) {
  constexpr int W = V::kWidth;
  int c0 = 0;
  for (; c0 + ND * W <= dim; c0 += ND * W) prefill_values_block<V, R, ND>(out, rescale, p, p_stride, v, dim, tokens, c0);
  const int left = (dim - c0) / W;  // head_dim is a multiple of W on every path that runs this
  if constexpr (ND >= 4) {
    if (left == 3) return prefill_values_block<V, R, 3>(out, rescale, p, p_stride, v, dim, tokens, c0);
  }
  if constexpr (ND >= 3) {
    if (left == 2) return prefill_values_block<V, R, 2>(out, rescale, p, p_stride, v, dim, tokens, c0);
  }
  if constexpr (ND >= 2) {
    if (left == 1) return prefill_values_block<V, R, 1>(out, rescale, p, p_stride, v, dim, tokens, c0);
  }
}

// The kernel. `dequantize(page, k, v)` writes the page's tokens as float rows [token][head_dim]
// (the path's own conversion: dequantize_page_ref's values, up to one rounding). Scratch, in floats:
// K transposed [head_dim][padded tokens], V rows, K rows (prefill_scratch_floats).
template <typename V, int R, int NK, int ND, typename Dequantize>
void prefill_page_tiled(const PrefillPageArgs& args, Dequantize&& dequantize) {
  using F = typename V::F;
  constexpr int W = V::kWidth;
  constexpr int kBlock = NK * W;
  static_assert(kBlock <= kPrefillTokenPad, "the scratch and the score rows pad a page by kPrefillTokenPad tokens");
  const PageView& page = args.page;
  const int dim = page.layout->head_dim;
  const int tokens = page.tokens;
  const int rows = args.n_queries * args.group;
  if (tokens <= 0 || rows <= 0) return;
  // Rows of the first query see `first_visible` tokens, each later query one more.
  const int first_visible = args.first_query_pos - args.first_token_pos + 1;
  if (first_visible + args.n_queries - 1 <= 0) return;

  const int padded = prefill_padded_tokens(tokens, kBlock);
  const auto row = static_cast<std::size_t>(dim);
  float* kt = args.scratch;
  float* v = kt + static_cast<std::size_t>(kMaxPageTokens + kPrefillTokenPad) * row;
  float* k = v + static_cast<std::size_t>(kMaxPageTokens) * row;
  dequantize(page, k, v);
  for (int c = 0; c < dim; ++c) {
    float* dst = kt + static_cast<std::size_t>(c) * padded;
    for (int t = 0; t < tokens; ++t) dst[t] = k[static_cast<std::size_t>(t) * row + c];
    for (int t = tokens; t < padded; ++t) dst[t] = 0.0f;
  }

  const std::size_t stride = SoftmaxState::stride(dim);
  alignas(64) float scores[R][kMaxPageTokens + kPrefillTokenPad];
  alignas(64) float zero_row[kMaxHeadDim] = {};
  alignas(64) float spare_out[kMaxHeadDim] = {};  // where rows past the tile's end write
  const float* q[R];
  float* out[R];
  float rescale[R];
  int visible[R];
  for (int r0 = 0; r0 < rows; r0 += R) {
    const int live = std::min(R, rows - r0);
    int most = 0;
    for (int r = 0; r < R; ++r) {
      if (r < live) {
        const int query = (r0 + r) / args.group;
        visible[r] = std::clamp(first_visible + query, 0, tokens);
        q[r] = args.q + static_cast<std::size_t>(r0 + r) * row;
      } else {
        visible[r] = 0;
        q[r] = zero_row;
      }
      most = std::max(most, visible[r]);
    }
    if (most == 0) continue;
    const int blocks_end = prefill_padded_tokens(most, kBlock);
    for (int t0 = 0; t0 < blocks_end; t0 += kBlock) {
      prefill_scores_block<V, R, NK>(q, kt, padded, dim, t0, &scores[0][0], kMaxPageTokens + kPrefillTokenPad);
    }
    // Online softmax per row: scores become weights exp(s - new max), zero past the row's
    // visible tokens, and the state's old output is rescaled in the P.V pass.
    for (int r = 0; r < R; ++r) {
      float* s = scores[r];
      if (r >= live || visible[r] == 0) {
        std::fill(s, s + most, 0.0f);
        rescale[r] = 1.0f;
        out[r] = spare_out;
        continue;
      }
      SoftmaxState state(args.states + static_cast<std::size_t>(r0 + r) * stride, dim);
      out[r] = state.out();
      const int seen = visible[r];
      const int whole = seen / W * W;
      alignas(64) float lanes[W];
      // Vector maxima first: one serial chain of scalar maxima costs a page's tokens times
      // the max latency per row.
      F most_v = V::set1(-INFINITY);
      for (int t = 0; t < whole; t += W) most_v = V::max(most_v, V::load(s + t));
      V::store(lanes, most_v);
      float page_max = -INFINITY;
      for (int i = 0; i < W; ++i) page_max = std::max(page_max, lanes[i]);
      for (int t = whole; t < seen; ++t) page_max = std::max(page_max, s[t]);
      const float new_max = state.empty() ? page_max : std::max(state.max(), page_max);
      V::store(lanes, V::exp(V::set1(state.max() - new_max)));
      rescale[r] = state.empty() ? 0.0f : lanes[0];
      const F m = V::set1(new_max);
      F total = V::zero();
      for (int t = 0; t < whole; t += W) {
        const F p = V::exp(V::sub(V::load(s + t), m));
        V::store(s + t, p);
        total = V::add(total, p);
      }
      V::store(lanes, total);
      float sum = 0.0f;
      for (int i = 0; i < W; ++i) sum += lanes[i];
      for (int t = whole; t < seen; ++t) {
        s[t] = std::exp(s[t] - new_max);
        sum += s[t];
      }
      for (int t = seen; t < most; ++t) s[t] = 0.0f;
      state.sum() = state.sum() * rescale[r] + sum;
      state.max() = new_max;
    }
    prefill_values<V, R, ND>(out, rescale, &scores[0][0], kMaxPageTokens + kPrefillTokenPad, v, dim, most);
  }
}

}  // namespace
}  // namespace kv
