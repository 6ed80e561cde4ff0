#include "model/dense.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "quant/fp16.h"
#include "runtime/isa.h"
#include "runtime/thread_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace kv {

namespace {


// Halves to floats: F16C on x86 where the CPU has it, NEON on Arm (both exact), else scalar.
#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) void halves_f16c(const std::uint16_t* in, std::size_t count, float* out) {
  std::size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
  for (; i < count; ++i) out[i] = f16_to_f32(in[i]);
}
#endif

void halves_to_floats(const std::uint16_t* in, std::size_t count, float* out) {
#if defined(__x86_64__)
  // The engine's AVX2 and AVX-512 paths require F16C (runtime/isa.h).
  static const bool f16c = best_isa() == Isa::Avx2 || best_isa() == Isa::Avx512;
  if (f16c) {
    halves_f16c(in, count, out);
    return;
  }
#elif defined(__aarch64__)
  std::size_t i = 0;
  for (; i + 4 <= count; i += 4) vst1q_f32(out + i, vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(in + i))));
  for (; i < count; ++i) out[i] = f16_to_f32(in[i]);
  return;
#endif
  for (std::size_t i = 0; i < count; ++i) out[i] = f16_to_f32(in[i]);
}

void q8_row_to_floats(const std::byte* row, int in_dim, float* out) {
  for (int b = 0; b < in_dim / kDenseQ8Block; ++b) {
    const std::byte* block = row + static_cast<std::size_t>(b) * kDenseQ8BlockBytes;
    std::uint16_t scale_bits;
    std::memcpy(&scale_bits, block, 2);
    const float scale = f16_to_f32(scale_bits);
    const auto* q = reinterpret_cast<const std::int8_t*>(block + 2);
    float* o = out + static_cast<std::size_t>(b) * kDenseQ8Block;
    for (int j = 0; j < kDenseQ8Block; ++j) o[j] = scale * static_cast<float>(q[j]);
  }
}

// Every BLAS call runs on its caller's thread (dense.h: the pool's threads call it at once).
void blas_on_callers_thread() {
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

// Output rows [begin, end) of y from f32 weight rows wb (row begin first).
void blas_rows(const float* x, int n, const float* wb, int out_dim, int in_dim, float* y, int begin, int end) {
  blas_on_callers_thread();
  if (n == 1) {
    cblas_sgemv(CblasRowMajor, CblasNoTrans, end - begin, in_dim, 1.0f, wb, in_dim, x, 1, 0.0f, y + begin, 1);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, end - begin, in_dim, 1.0f, x, in_dim, wb, in_dim, 0.0f, y + begin,
              out_dim);
}

void dense_rows(const float* x, int n, const DenseView& w, float* y, int begin, int end) {
  if (w.format == DenseFormat::F32) {
    blas_rows(x, n, reinterpret_cast<const float*>(w.rows) + static_cast<std::size_t>(begin) * w.in_dim, w.out_dim, w.in_dim, y,
              begin, end);
    return;
  }
  // One panel per thread, reused across calls: a slice of rows, or the whole (small) matrix.
  thread_local std::vector<float> panel;
  panel.resize(static_cast<std::size_t>(end - begin) * w.in_dim);
  dense_dequantize(w, begin, end - begin, panel.data());
  blas_rows(x, n, panel.data(), w.out_dim, w.in_dim, y, begin, end);
}

}  // namespace

std::string dense_blas_core() { return openblas_get_corename(); }

const char* dense_format_name(DenseFormat format) {
  switch (format) {
    case DenseFormat::F32: return "f32";
    case DenseFormat::F16: return "f16";
    case DenseFormat::Q8: return "q8";
  }
  return "?";
}

std::size_t dense_row_bytes(DenseFormat format, int in_dim) {
  const auto n = static_cast<std::size_t>(in_dim);
  switch (format) {
    case DenseFormat::F32: return n * 4;
    case DenseFormat::F16: return n * 2;
    case DenseFormat::Q8: return n / kDenseQ8Block * kDenseQ8BlockBytes;
  }
  return 0;
}

DenseMatrix::DenseMatrix(DenseFormat format, std::size_t rows, int cols, std::vector<std::byte> bytes)
    : format_(format), rows_(rows), cols_(cols), bytes_(std::move(bytes)) {
  if (format == DenseFormat::Q8 && cols % kDenseQ8Block != 0) throw std::invalid_argument("DenseMatrix: q8 rows need a multiple of 32 values");
  if (bytes_.size() != rows * dense_row_bytes(format, cols)) throw std::invalid_argument("DenseMatrix: byte count does not match its shape");
}

DenseMatrix DenseMatrix::from_f32(const std::vector<float>& values, int cols) {
  const std::size_t rows = cols > 0 ? values.size() / static_cast<std::size_t>(cols) : 0;
  return DenseMatrix(DenseFormat::F32, rows, cols, dense_encode(DenseFormat::F32, values.data(), rows, cols));
}

DenseView DenseMatrix::view(std::size_t first, int count) const {
  if (first + static_cast<std::size_t>(count) > rows_) throw std::out_of_range("DenseMatrix::view past the last row");
  return {format_, bytes_.data() + first * dense_row_bytes(format_, cols_), count, cols_};
}

std::vector<float> DenseMatrix::to_f32() const {
  std::vector<float> out(rows_ * static_cast<std::size_t>(cols_));
  if (rows_ > 0) dense_dequantize({format_, bytes_.data(), static_cast<int>(rows_), cols_}, 0, static_cast<int>(rows_), out.data());
  return out;
}

void dense_dequantize(const DenseView& w, int first, int count, float* out) {
  const std::size_t row_bytes = dense_row_bytes(w.format, w.in_dim);
  const std::byte* rows = w.rows + static_cast<std::size_t>(first) * row_bytes;
  const std::size_t values = static_cast<std::size_t>(count) * w.in_dim;
  switch (w.format) {
    case DenseFormat::F32: std::memcpy(out, rows, values * sizeof(float)); return;
    case DenseFormat::F16: halves_to_floats(reinterpret_cast<const std::uint16_t*>(rows), values, out); return;
    case DenseFormat::Q8:
      for (int r = 0; r < count; ++r) q8_row_to_floats(rows + static_cast<std::size_t>(r) * row_bytes, w.in_dim, out + static_cast<std::size_t>(r) * w.in_dim);
      return;
  }
}

void dense(ThreadPool& pool, const float* x, int n, const DenseView& w, float* y) {
  if (n <= 0 || w.out_dim <= 0) return;
  const std::size_t macs = static_cast<std::size_t>(n) * static_cast<std::size_t>(w.out_dim) * static_cast<std::size_t>(w.in_dim);
  const int slices = (w.out_dim + kDenseSliceRows - 1) / kDenseSliceRows;
  if (macs < kDenseParallelMacs || slices == 1) {
    dense_rows(x, n, w, y, 0, w.out_dim);
    return;
  }
  pool.parallel_for(static_cast<std::size_t>(slices), [&](std::size_t slice) {
    const int begin = static_cast<int>(slice) * kDenseSliceRows;
    dense_rows(x, n, w, y, begin, std::min(w.out_dim, begin + kDenseSliceRows));
  });
}

void dense_f32(ThreadPool& pool, const float* x, int n, const float* w, int out_dim, int in_dim, float* y) {
  dense(pool, x, n, {DenseFormat::F32, reinterpret_cast<const std::byte*>(w), out_dim, in_dim}, y);
}

void dense_ref(const float* x, int n, const DenseView& w, float* y) {
  std::vector<float> row(static_cast<std::size_t>(w.in_dim));
  for (int i = 0; i < w.out_dim; ++i) {
    dense_dequantize(w, i, 1, row.data());
    for (int t = 0; t < n; ++t) {
      const float* xt = x + static_cast<std::size_t>(t) * w.in_dim;
      double sum = 0.0;
      for (int j = 0; j < w.in_dim; ++j) sum += static_cast<double>(row[static_cast<std::size_t>(j)]) * xt[j];
      y[static_cast<std::size_t>(t) * w.out_dim + i] = static_cast<float>(sum);
    }
  }
}

void dense_f32_ref(const float* x, int n, const float* w, int out_dim, int in_dim, float* y) {
  dense_ref(x, n, {DenseFormat::F32, reinterpret_cast<const std::byte*>(w), out_dim, in_dim}, y);
}

std::vector<std::byte> dense_encode(DenseFormat format, const float* values, std::size_t rows, int cols) {
  const std::size_t count = rows * static_cast<std::size_t>(cols);
  std::vector<std::byte> bytes(rows * dense_row_bytes(format, cols));
  switch (format) {
    case DenseFormat::F32: std::memcpy(bytes.data(), values, count * sizeof(float)); break;
    case DenseFormat::F16:
      for (std::size_t i = 0; i < count; ++i) {
        const std::uint16_t h = f32_to_f16(values[i]);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
      break;
    case DenseFormat::Q8:
      if (cols % kDenseQ8Block != 0) throw std::invalid_argument("dense_encode: q8 rows need a multiple of 32 values");
      for (std::size_t b = 0; b < count / kDenseQ8Block; ++b) {
        const float* v = values + b * kDenseQ8Block;
        float amax = 0.0f;
        for (int j = 0; j < kDenseQ8Block; ++j) amax = std::max(amax, std::fabs(v[j]));
        const float d = amax / 127.0f, inverse = d > 0.0f ? 1.0f / d : 0.0f;
        std::byte* block = bytes.data() + b * kDenseQ8BlockBytes;
        const std::uint16_t scale = f32_to_f16(d);
        std::memcpy(block, &scale, 2);
        for (int j = 0; j < kDenseQ8Block; ++j) {
          block[2 + j] = static_cast<std::byte>(static_cast<std::int8_t>(std::lround(std::clamp(v[j] * inverse, -127.0f, 127.0f))));
        }
      }
      break;
  }
  return bytes;
}

}  // namespace kv
