#include "attention/arch/x86/simd_avx2.h"
#include "exp_kernels.h"

namespace kvbench::micro {

void exp_batch_avx2(const float* x, float* y, std::size_t n) {
  for (std::size_t i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, kv::exp_ps(_mm256_loadu_ps(x + i)));
}

}  // namespace kvbench::micro
