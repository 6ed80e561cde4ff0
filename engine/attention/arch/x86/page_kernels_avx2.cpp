// AVX2+FMA+F16C kernels. Compiled with those flags and only called after a CPUID check.
#include "attention/page_kernels.h"
#include "attention/arch/x86/simd_avx2.h"
#include "attention/arch/x86/decode_simd_impl.h"
#include "attention/dequantize_simd_impl.h"
#include "attention/prefill_tile_impl.h"

namespace kv::avx2 {

void decode_page(const PageView& page, const float* q, int group, float* states, float* page_lse) {
  decode_page_simd<V8>(page, q, group, states, page_lse);
}

// Sixteen registers: tiles of 4 rows x 2 vectors (scores) and 4 rows x 2 vectors (outputs), with
// the loads and the broadcast beside them.
void prefill_page(const PrefillPageArgs& args) { prefill_page_tiled<V8, 4, 2, 2>(args, dequantize_page_simd<V8>); }

void page_bounds(const std::uint16_t* bounds, std::size_t count, int head_dim, const float* q, int group, float* out) {
  page_bounds_simd<V8>(bounds, count, head_dim, q, group, out);
}

}  // namespace kv::avx2
