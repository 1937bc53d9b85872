#pragma once
// Dense linear algebra for the CPU layers: GEMM over row-major float matrices (Eigen underneath,
// single-threaded) and the im2col / col2im transforms that turn a convolution into a GEMM.
//
// All matrices are row-major with an explicit leading dimension (the distance between rows).
#include <cstdint>
#include <span>
#include <string_view>

namespace syncopate {

enum class Trans { kNo, kYes };

// A row-major matrix view: rows x cols, row r starts at data[r * ld].
struct MatrixView {
  const float* data = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
};
struct MutableMatrixView {
  float* data = nullptr;
  int64_t rows = 0, cols = 0, ld = 0;
  operator MatrixView() const { return {data, rows, cols, ld}; }  // NOLINT: read-only use
};

// Row-major views over a contiguous span (ld = cols); checks that the span is large enough.
MatrixView matrix(std::span<const float> values, int64_t rows, int64_t cols);
MutableMatrixView matrix(std::span<float> values, int64_t rows, int64_t cols);

// C = alpha * op(A) * op(B) + beta * C, where op(X) is X or its transpose.
// op(A) is m x k, op(B) is k x n, C is m x n. beta == 0 overwrites C (NaNs in C do not leak).
// C must not overlap A or B.
void gemm(Trans trans_a, Trans trans_b, float alpha, const MatrixView& a, const MatrixView& b,
          float beta, const MutableMatrixView& c);

// The product kernel gemm() runs on this CPU: "avx512" or "avx2_fma" (chosen at run time where
// the CPU has them and the build has the kernel, see gemm_product.hpp), or "generic" (the
// build's target); SYNCOPATE_GEMM_KERNEL may pin one. Throws UserError for a bad pin.
std::string_view gemm_kernel();

// sums[r] += sum of row r of a (a bias gradient over an NCHW image: one row per channel).
void add_row_sums(const MatrixView& a, std::span<float> sums);
// sums[c] += sum of column c of a (a bias gradient over a batch of dense outputs).
void add_column_sums(const MatrixView& a, std::span<float> sums);

// Geometry of a 2-D convolution or pooling window over one (C, H, W) image.
struct ConvGeometry {
  int64_t channels = 0, height = 0, width = 0;
  int64_t kernel = 1, stride = 1, padding = 0;
  int64_t out_height() const { return (height + 2 * padding - kernel) / stride + 1; }
  int64_t out_width() const { return (width + 2 * padding - kernel) / stride + 1; }
  int64_t col_rows() const { return channels * kernel * kernel; }
  int64_t col_cols() const { return out_height() * out_width(); }
};

// Unfolds one image x (C, H, W) into col (C*k*k, Ho*Wo): row (c, ky, kx), column (oy, ox) holds
// x[c][oy*stride - pad + ky][ox*stride - pad + kx], or 0 where that falls in the padding.
// col_ld is the distance between col's rows (>= Ho*Wo), so several images can sit side by side.
void im2col(std::span<const float> x, const ConvGeometry& g, float* col, int64_t col_ld);
// The adjoint of im2col: ADDS every col entry into the x position it was read from. col is also
// scratch: entries that im2col would have taken from the padding may be overwritten with zeros.
void col2im_add(float* col, int64_t col_ld, const ConvGeometry& g, std::span<float> x);

}  // namespace syncopate
