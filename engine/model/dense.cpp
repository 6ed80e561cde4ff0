#include "model/dense.h"

#include <cblas.h>

#include <algorithm>

#include "runtime/thread_pool.h"

namespace kv {

namespace {

// Output rows [begin, end) of y.
void dense_rows(const float* x, int n, const float* w, int out_dim, int in_dim, float* y, int begin, int end) {
  const float* wb = w + static_cast<std::size_t>(begin) * in_dim;
  if (n == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, end - begin, in_dim, 1.0f, wb, in_dim, x, 1, 0.0f, y + begin, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, end - begin, in_dim, 1.0f, x, in_dim, wb, in_dim, 0.0f, y + begin,
              out_dim);
}

}  // namespace

void dense_f32(ThreadPool& pool, const float* x, int n, const float* w, int out_dim, int in_dim, float* y) {
  if (n <= 0 || out_dim <= 0) return;
  const std::size_t macs = static_cast<std::size_t>(n) * static_cast<std::size_t>(out_dim) * static_cast<std::size_t>(in_dim);
  const int slices = (out_dim + kDenseSliceRows - 1) / kDenseSliceRows;
  if (macs < kDenseParallelMacs || slices == 1) {
    dense_rows(x, n, w, out_dim, in_dim, y, 0, out_dim);
    return;
  }
  pool.parallel_for(static_cast<std::size_t>(slices), [&](std::size_t slice) {
    const int begin = static_cast<int>(slice) * kDenseSliceRows;
    dense_rows(x, n, w, out_dim, in_dim, y, begin, std::min(out_dim, begin + kDenseSliceRows));
  });
}

void dense_f32_ref(const float* x, int n, const float* w, int out_dim, int in_dim, float* y) {
  for (int t = 0; t < n; ++t) {
    const float* xt = x + static_cast<std::size_t>(t) * in_dim;
    for (int i = 0; i < out_dim; ++i) {
      const float* wi = w + static_cast<std::size_t>(i) * in_dim;
      double sum = 0.0;
      for (int j = 0; j < in_dim; ++j) sum += static_cast<double>(wi[j]) * xt[j];
      y[static_cast<std::size_t>(t) * out_dim + i] = static_cast<float>(sum);
    }
  }
}

}  // namespace kv
