// AVX-512 kernels: the decode kernel body at 16 lanes. Compiled with AVX-512 flags and only
// called after a CPUID check. Head dims that are not a multiple of 16, and integer V in groups
// that are not (8, 24, 40 channels), run the 8-lane body, which every AVX-512 CPU also supports:
// a vector of V then never spans two groups' scales.
#include "attention/page_kernels.h"
#include "attention/arch/x86/simd_avx2.h"
#include "attention/arch/x86/simd_avx512.h"
#include "attention/arch/x86/decode_simd_impl.h"
#include "attention/dequantize_simd_impl.h"
#include "attention/prefill_tile_impl.h"

namespace kv::avx512 {

namespace {
bool has_vnni() {
  static const bool vnni = __builtin_cpu_supports("avx512vnni");
  return vnni;
}
// Whether a page's V rows read 16 lanes at a time without a vector crossing two V groups.
bool v_fits_16(const PageLayout& layout) {
  const Format f = layout.v_format;
  return !(f == Format::Q8 || f == Format::Q4 || f == Format::Q2) || layout.v_group % V16::kWidth == 0;
}
}  // namespace

// More than four rows (verification's queries times the group, or a wide group) of q4 pages
// take the VNNI row kernel, which unpacks each page once for all rows; the fused kernel works
// in chunks of four.
void decode_page(const PageView& page, const float* q, int group, float* states, float* page_lse) {
  if (group > 4 && page.tokens > 0 && has_vnni() && avx512vnni::decode_rows_applies(*page.layout)) {
    avx512vnni::decode_rows(page, q, group, states, page_lse);
    return;
  }
  if (page.layout->head_dim % V16::kWidth == 0 && v_fits_16(*page.layout)) {
    decode_page_simd<V16>(page, q, group, states, page_lse);
  } else {
    decode_page_simd<V8>(page, q, group, states, page_lse);
  }
}

// Thirty-two registers: 6 rows x 4 vectors of accumulators (scores: 64 tokens; outputs: 64
// channels), four loads and a broadcast. The tiles work on float rows, so only the conversion
// of V in groups that are not whole vectors takes 8 lanes.
void prefill_page(const PrefillPageArgs& args) {
  if (args.page.layout->head_dim % V16::kWidth == 0) {
    prefill_page_tiled<V16, 6, 4, 4>(args, v_fits_16(*args.page.layout) ? dequantize_page_simd<V16> : dequantize_page_simd<V8>);
  } else {
    prefill_page_tiled<V8, 4, 2, 2>(args, dequantize_page_simd<V8>);
  }
}

void page_bounds(const std::uint16_t* bounds, std::size_t count, int head_dim, const float* q, int group, float* out) {
  if (head_dim % V16::kWidth == 0) {
    page_bounds_simd<V16>(bounds, count, head_dim, q, group, out);
  } else {
    page_bounds_simd<V8>(bounds, count, head_dim, q, group, out);
  }
}

}  // namespace kv::avx512
