// AVX2+FMA+F16C kernels. Compiled with those flags and only called after a CPUID check.
#include "attention/page_kernels.h"
#include "attention/arch/x86/simd_avx2.h"
#include "attention/arch/x86/decode_simd_impl.h"
#include "attention/prefill_page_impl.h"

namespace kv::avx2 {

void decode_page(const PageView& page, const float* q, int group, float* states, float* page_lse) {
  decode_page_simd<V8>(page, q, group, states, page_lse);
}

void prefill_page(const PrefillPageArgs& args) { prefill_page_impl(args); }

void page_bounds(const std::uint16_t* bounds, std::size_t count, int head_dim, const float* q, int group, float* out) {
  page_bounds_simd<V8>(bounds, count, head_dim, q, group, out);
}

}  // namespace kv::avx2
