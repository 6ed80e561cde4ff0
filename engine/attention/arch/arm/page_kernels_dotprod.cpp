// Arm dotprod kernels: NEON plus SDOT for q8/q4 K and q4 V (int_dot.h). Compiled with
// +dotprod and only called after the AT_HWCAP check (runtime/isa.cpp).
#include "attention/page_kernels.h"
#include "attention/arch/arm/decode_arm_impl.h"

namespace kv::dotprod {

void decode_page(const PageView& page, const float* q, int group, float* states, float* page_lse) {
  decode_page_arm<ArmDot::Sdot>(page, q, group, states, page_lse);
}

}  // namespace kv::dotprod
