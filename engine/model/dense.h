// Dense layers of the model backends: y = x W^T through a BLAS (Debian's serial OpenBLAS), the
// rows of the output cut into slices on the engine's pool.
//
// The serial build, not the pthread or OpenMP one: the engine's pool already holds the cores
// (attention, migration, the harness's probes), a second pool inside the BLAS would fight it
// for them, and a BLAS that splits work by its own thread count would make the rounding of a
// product depend on the machine. Here the slices depend only on the shape.
#pragma once

#include <cstddef>

namespace kv {

class ThreadPool;

// Output rows per BLAS call when a product is split (a multiple of the kernels' row blocks).
inline constexpr int kDenseSliceRows = 128;
// Products below this many multiply-adds run as one call on the caller's thread.
inline constexpr std::size_t kDenseParallelMacs = std::size_t{1} << 18;

// y[t][i] = sum_j w[i][j] * x[t][j], for x [n][in_dim], w [out_dim][in_dim] (row-major, as
// llama2.c stores its matrices) and y [n][out_dim]: a GEMV for one token, a GEMM for several.
void dense_f32(ThreadPool& pool, const float* x, int n, const float* w, int out_dim, int in_dim, float* y);

// The same product with a plain loop in double precision: the tests' reference.
void dense_f32_ref(const float* x, int n, const float* w, int out_dim, int in_dim, float* y);

}  // namespace kv
