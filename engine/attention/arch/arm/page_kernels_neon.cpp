// Arm NEON kernels (every aarch64 CPU): float formats, and integer codes turned into floats.
// Prefill and page bounds here serve the dotprod and i8mm paths too.
#include "attention/page_kernels.h"
#include "attention/arch/arm/decode_arm_impl.h"
#include "attention/arch/arm/page_bounds_neon.h"
#include "attention/prefill_page_impl.h"

namespace kv::neon {

void decode_page(const PageView& page, const float* q, int group, float* states, float* page_lse) {
  decode_page_arm<ArmDot::None>(page, q, group, states, page_lse);
}

void prefill_page(const PrefillPageArgs& args) { prefill_page_impl(args); }

void page_bounds(const std::uint16_t* bounds, std::size_t count, int head_dim, const float* q, int group, float* out) {
  page_bounds_neon(bounds, count, head_dim, q, group, out);
}

}  // namespace kv::neon
