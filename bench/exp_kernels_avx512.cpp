#include "attention/arch/x86/simd_avx512.h"
#include "exp_kernels.h"

namespace kvbench::micro {

void exp_batch_avx512(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, kv::exp_ps16(_mm512_loadu_ps(x + i)));
}

}  // namespace kvbench::micro
