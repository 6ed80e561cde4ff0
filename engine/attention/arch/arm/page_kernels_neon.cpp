// Arm NEON kernels (every aarch64 CPU): float formats, and integer codes turned into floats.
// Prefill and page bounds here serve the dotprod and i8mm paths too.
#include "attention/page_kernels.h"
#include "attention/arch/arm/decode_arm_impl.h"
#include "attention/arch/arm/page_bounds_neon.h"
#include "attention/dequantize_simd_impl.h"
#include "attention/prefill_tile_impl.h"

namespace kv::neon {

void decode_page(const PageView& page, const float* q, int group, float* states, float* page_lse) {
  decode_page_arm<ArmDot::None>(page, q, group, states, page_lse);
}

// Thirty-two registers: 4 rows x 4 vectors of accumulators, the loads and broadcasts beside.
void prefill_page(const PrefillPageArgs& args) { prefill_page_tiled<V4, 4, 4, 4>(args, dequantize_page_simd<V4>); }

void page_bounds(const std::uint16_t* bounds, std::size_t count, int head_dim, const float* q, int group, float* out) {
  page_bounds_neon(bounds, count, head_dim, q, group, out);
}

}  // namespace kv::neon
