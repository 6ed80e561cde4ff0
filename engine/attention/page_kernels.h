// Per-page attention kernels and their runtime dispatch table. A kernel folds one page into
// online-softmax states (softmax_state.h); paged_attention.h splits the work and merges.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "quant/page_layout.h"
#include "runtime/isa.h"

namespace kv {

// Decode: one query per q head of a GQA group. q: [group][head_dim], already multiplied by
// the softmax scale. states: [group] states of stride SoftmaxState::stride(head_dim).
// One pass over the page's K and V serves every q head of the group. page_lse, when not null,
// receives [group] log-sum-exp of the page's (scaled) scores: the page's attention mass is
// exp(page_lse - final lse of the query).
using DecodePageFn = void (*)(const PageView& page, const float* q, int group, float* states, float* page_lse);

inline constexpr int kMaxHeadDim = 512;      // geometry.cpp's limit
inline constexpr int kPrefillTokenPad = 64;  // the widest key block of a prefill tile (prefill_tile_impl.h)

// Prefill: n queries at absolute positions first_query_pos + i, causal against the page's
// tokens at positions first_token_pos + t. q: [n][group][head_dim] (pre-scaled);
// states: [n][group]. `scratch` holds prefill_scratch_floats(head_dim) floats: the page as
// floats, K transposed and padded, V and K in rows.
inline std::size_t prefill_scratch_floats(int head_dim) {
  return static_cast<std::size_t>(3 * kMaxPageTokens + kPrefillTokenPad) * static_cast<std::size_t>(head_dim);
}
struct PrefillPageArgs {
  PageView page;
  int first_token_pos = 0;
  const float* q = nullptr;
  int n_queries = 0;
  int group = 0;
  int first_query_pos = 0;
  float* states = nullptr;
  float* scratch = nullptr;
};
using PrefillPageFn = void (*)(const PrefillPageArgs& args);

// Quest's page score for the q heads of a group, for `count` pages of one kv head (one call,
// so that a page's reduction overlaps the next page's loads): out[i] = max over g of
// sum_c max(q[g][c] * key_min[c], q[g][c] * key_max[c]) over page i (sparse/quest.h).
// bounds: the pages' key bounds, one after another, f16 [count][key_min, key_max][head_dim]
// (the layout of PageView::key_bounds and of KVCache's page summaries).
using PageBoundsFn = void (*)(const std::uint16_t* bounds, std::size_t count, int head_dim, const float* q, int group,
                              float* out);

// One kv head's key bounds in logical page order, f16 [page][key_min, key_max][head_dim]: the
// sealed pages' run where it lives (KVCache's summaries, valid until the sequence changes),
// then a copy of the residual pages' own.
struct HeadKeyBounds {
  const std::uint16_t* sealed = nullptr;
  std::size_t sealed_pages = 0;
  std::vector<std::uint16_t> residual;

  std::size_t pages(int head_dim) const { return sealed_pages + residual.size() / (2 * static_cast<std::size_t>(head_dim)); }
  // Appends one page's bounds (f16[head_dim] each) to `residual`.
  void add_residual(const std::uint16_t* key_min, const std::uint16_t* key_max, int head_dim) {
    residual.insert(residual.end(), key_min, key_min + head_dim);
    residual.insert(residual.end(), key_max, key_max + head_dim);
  }
};

struct PageKernels {
  Isa isa = Isa::Scalar;
  DecodePageFn decode_page = nullptr;
  PrefillPageFn prefill_page = nullptr;
  PageBoundsFn page_bounds = nullptr;
};

// Reference twin of every page_bounds kernel, one page: its key_min and key_max (f16[head_dim]
// each), or a view's.
float page_bound_ref(const std::uint16_t* key_min, const std::uint16_t* key_max, int head_dim, const float* q, int group);
float page_bound_ref(const PageView& page, const float* q, int group);

// The kernels of a concrete, supported ISA (resolve Auto with resolve_isa first).
const PageKernels& page_kernels(Isa isa);

// Reference twin of every decode kernel: dequantize the page with the reference dequantizer,
// then fold it in double precision with std::exp.
void decode_page_ref(const PageView& page, const float* q, int group, float* states, float* page_lse = nullptr);

// Reference twin of the SIMD decode kernels where they take integer dot products (int_dot.h):
// the same integer queries (int8; 14-bit for q8 on Arm) and 7-bit weights, summed exactly. The kernels' softmax numerators come
// from a polynomial exp, so a weight that sits on a rounding boundary may round the other way
// there; `v_quantum` (optional, [group]) receives the most one such flip per (head, V group)
// moves the page's normalised output, max over groups of midpoint * s / sum(p).
// `isa`: the path whose integer rules (int_dot_paths) the twin follows.
void decode_page_int_ref(Isa isa, const PageView& page, const float* q, int group, float* states, float* page_lse = nullptr,
                         float* v_quantum = nullptr);

namespace scalar {
void decode_page(const PageView& page, const float* q, int group, float* states, float* page_lse);
void prefill_page(const PrefillPageArgs& args);
void page_bounds(const std::uint16_t* bounds, std::size_t count, int head_dim, const float* q, int group, float* out);
}  // namespace scalar
namespace avx2 {
void decode_page(const PageView& page, const float* q, int group, float* states, float* page_lse);
void prefill_page(const PrefillPageArgs& args);
void page_bounds(const std::uint16_t* bounds, std::size_t count, int head_dim, const float* q, int group, float* out);
}  // namespace avx2
namespace avx512 {
void decode_page(const PageView& page, const float* q, int group, float* states, float* page_lse);
void prefill_page(const PrefillPageArgs& args);
void page_bounds(const std::uint16_t* bounds, std::size_t count, int head_dim, const float* q, int group, float* out);
}  // namespace avx512
// AVX-512 VNNI: many rows of q heads against one page (verification, wide GQA groups), q4 K
// and V; avx512::decode_page takes it where the CPU has VNNI and the layout applies.
namespace avx512vnni {
bool decode_rows_applies(const PageLayout& layout);
void decode_rows(const PageView& page, const float* q, int rows, float* states, float* page_lse);
}  // namespace avx512vnni
// Arm: NEON's prefill and page bounds serve all three paths; decode differs by the integer
// instructions it may use (arch/arm/).
namespace neon {
void decode_page(const PageView& page, const float* q, int group, float* states, float* page_lse);
void prefill_page(const PrefillPageArgs& args);
void page_bounds(const std::uint16_t* bounds, std::size_t count, int head_dim, const float* q, int group, float* out);
}  // namespace neon
namespace dotprod {
void decode_page(const PageView& page, const float* q, int group, float* states, float* page_lse);
}  // namespace dotprod
namespace i8mm {
void decode_page(const PageView& page, const float* q, int group, float* states, float* page_lse);
}  // namespace i8mm

}  // namespace kv
