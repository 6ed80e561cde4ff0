// Arm i8mm kernels: the dotprod kernels with K scored by USMMLA (two tokens by two q heads per
// instruction, unsigned codes against the signed query). Compiled with +i8mm and only called
// after the AT_HWCAP2 check (runtime/isa.cpp).
#include "attention/page_kernels.h"
#include "attention/arch/arm/decode_arm_impl.h"

namespace kv::i8mm {

void decode_page(const PageView& page, const float* q, int group, float* states, float* page_lse) {
  decode_page_arm<ArmDot::Mmla>(page, q, group, states, page_lse);
}

}  // namespace kv::i8mm
