// The attention kernels' own exponential (the polynomial exp of engine/attention/arch/x86), over
// a batch of arguments <= 0 as a softmax passes them: what calibrate prices a softmax numerator
// at. Each function is compiled for its instruction set; callers check the CPU first.
#pragma once

#include <cstddef>

namespace kvbench::micro {

void exp_batch_avx2(const float* x, float* y, std::size_t n);    // n a multiple of 8
void exp_batch_avx512(const float* x, float* y, std::size_t n);  // n a multiple of 16

}  // namespace kvbench::micro
