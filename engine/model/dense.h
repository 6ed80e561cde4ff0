// Dense layers of the model backends: y = x W^T through a BLAS (Debian's OpenBLAS, pthread
// build), the rows of the output cut into slices on the engine's pool.
//
// OpenBLAS runs each call on its caller's thread (openblas_set_num_threads(1) before the first):
// the engine's pool already holds the cores (attention, migration, the harness's probes), a
// second pool inside the BLAS would fight it for them, and a BLAS that splits work by its own
// thread count would make the rounding of a product depend on the machine. Here the slices
// depend only on the shape. The pthread build, not the serial one, because the pool calls it
// from several threads at once: Debian builds the serial library without locking, and there
// concurrent sgemm calls share packing buffers (with the Haswell kernels about one result in
// ten came out wrong); the pthread build locks its buffer allocation.
//
// Weights in f16 or q8 (GGML's Q8_0: blocks of 32 int8 with an f16 scale) stay in their own
// format in memory and are dequantized to f32 panels, one slice of rows at a time, just before
// the BLAS call that multiplies them: OpenBLAS has no GEMM on quantized operands. Dequantization
// is exact, so a product over f16 or q8 weights equals, bit for bit, the product over the same
// weights stored as f32.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kv {

class ThreadPool;

enum class DenseFormat : std::uint8_t { F32, F16, Q8 };
inline constexpr int kDenseFormatCount = 3;
inline constexpr DenseFormat kAllDenseFormats[] = {DenseFormat::F32, DenseFormat::F16, DenseFormat::Q8};
const char* dense_format_name(DenseFormat format);

// Values per Q8 block (the block's bytes: an f16 scale, then 32 int8).
inline constexpr int kDenseQ8Block = 32;
inline constexpr std::size_t kDenseQ8BlockBytes = 2 + kDenseQ8Block;

// Bytes of one row of in_dim weights (q8: in_dim must be a multiple of kDenseQ8Block).
std::size_t dense_row_bytes(DenseFormat format, int in_dim);

// Rows [first, first + out_dim) of a row-major weight matrix, in_dim values each.
struct DenseView {
  DenseFormat format = DenseFormat::F32;
  const std::byte* rows = nullptr;
  int out_dim = 0;
  int in_dim = 0;
};

// A stack of row-major matrices (llama2.c's layout: per-layer matrices one after another) in
// one weight format.
class DenseMatrix {
 public:
  DenseMatrix() = default;
  DenseMatrix(DenseFormat format, std::size_t rows, int cols, std::vector<std::byte> bytes);
  static DenseMatrix from_f32(const std::vector<float>& values, int cols);

  DenseFormat format() const { return format_; }
  std::size_t rows() const { return rows_; }
  int cols() const { return cols_; }
  const std::vector<std::byte>& bytes() const { return bytes_; }
  // Rows [first, first + count).
  DenseView view(std::size_t first, int count) const;
  // Every value, dequantized (tests, checks).
  std::vector<float> to_f32() const;
  bool operator==(const DenseMatrix&) const = default;

 private:
  DenseFormat format_ = DenseFormat::F32;
  std::size_t rows_ = 0;
  int cols_ = 0;
  std::vector<std::byte> bytes_;
};

// Output rows per BLAS call when a product is split (a multiple of the kernels' row blocks).
inline constexpr int kDenseSliceRows = 128;
// Products below this many multiply-adds run as one call on the caller's thread.
inline constexpr std::size_t kDenseParallelMacs = std::size_t{1} << 18;

// y[t][i] = sum_j w[i][j] * x[t][j], for x [n][in_dim], the weight rows w and y [n][out_dim]:
// a GEMV for one token, a GEMM for several.
void dense(ThreadPool& pool, const float* x, int n, const DenseView& w, float* y);
void dense_f32(ThreadPool& pool, const float* x, int n, const float* w, int out_dim, int in_dim, float* y);

// Rows [first, first + count) of w dequantized to f32 into out [count][in_dim] (exact).
void dense_dequantize(const DenseView& w, int first, int count, float* out);

// The same product with a plain loop in double precision over the dequantized weights: the
// tests' reference.
void dense_ref(const float* x, int n, const DenseView& w, float* y);
void dense_f32_ref(const float* x, int n, const float* w, int out_dim, int in_dim, float* y);

// The kernels OpenBLAS runs on this CPU: its core name (Haswell, SkylakeX, Cooperlake,
// NeoverseN1, ...), detected at start-up or forced by the OPENBLAS_CORETYPE environment variable.
std::string dense_blas_core();

// Encodes f32 values in a weight format (round to nearest; q8: GGML's scale max|x| / 127 per
// block): builds the f16 and q8 weights of tests and benchmarks.
std::vector<std::byte> dense_encode(DenseFormat format, const float* values, std::size_t rows, int cols);

}  // namespace kv
