#include "core/gemm.hpp"

// GCC 12 reports false "may be used uninitialized" warnings inside Eigen's AVX-512 kernels.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#include <algorithm>
#include <cstring>

#include "core/check.hpp"

namespace syncopate {
namespace {

using RowMajorMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMajorMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;
using MutableMap = Eigen::Map<RowMajorMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;

ConstMap as_eigen(const MatrixView& m) {
  return ConstMap(m.data, m.rows, m.cols, Eigen::OuterStride<>(m.ld));
}

// One Eigen GEMM: the transposes are expression flags (no copies), noalias avoids a temporary.
template <typename Lhs, typename Rhs>
void product(float alpha, const Lhs& a, const Rhs& b, float beta, MutableMap& c) {
  if (beta == 0.0f) {
    c.noalias() = alpha * a * b;
  } else {
    if (beta != 1.0f) c *= beta;
    c.noalias() += alpha * a * b;
  }
}

void check_view(const char* name, int64_t rows, int64_t cols, int64_t ld, const void* data) {
  SYNC_CHECK(rows >= 0 && cols >= 0 && ld >= cols && (data != nullptr || rows * cols == 0),
             name << ": rows " << rows << " cols " << cols << " ld " << ld);
}

}  // namespace

MatrixView matrix(std::span<const float> values, int64_t rows, int64_t cols) {
  SYNC_CHECK(static_cast<int64_t>(values.size()) >= rows * cols,
             values.size() << " values for " << rows << "x" << cols);
  return {values.data(), rows, cols, cols};
}

MutableMatrixView matrix(std::span<float> values, int64_t rows, int64_t cols) {
  SYNC_CHECK(static_cast<int64_t>(values.size()) >= rows * cols,
             values.size() << " values for " << rows << "x" << cols);
  return {values.data(), rows, cols, cols};
}

void gemm(Trans trans_a, Trans trans_b, float alpha, const MatrixView& a, const MatrixView& b,
          float beta, const MutableMatrixView& c) {
  check_view("gemm A", a.rows, a.cols, a.ld, a.data);
  check_view("gemm B", b.rows, b.cols, b.ld, b.data);
  check_view("gemm C", c.rows, c.cols, c.ld, c.data);
  const bool ta = trans_a == Trans::kYes, tb = trans_b == Trans::kYes;
  const int64_t m = ta ? a.cols : a.rows, k = ta ? a.rows : a.cols;
  const int64_t kb = tb ? b.cols : b.rows, n = tb ? b.rows : b.cols;
  SYNC_CHECK(k == kb && c.rows == m && c.cols == n, "gemm shapes: op(A) "
                                                        << m << "x" << k << ", op(B) " << kb << "x"
                                                        << n << ", C " << c.rows << "x" << c.cols);
  if (m == 0 || n == 0) return;
  MutableMap cm(c.data, c.rows, c.cols, Eigen::OuterStride<>(c.ld));
  const ConstMap am = as_eigen(a), bm = as_eigen(b);
  if (!ta && !tb) {
    product(alpha, am, bm, beta, cm);
  } else if (!ta && tb) {
    product(alpha, am, bm.transpose(), beta, cm);
  } else if (ta && !tb) {
    product(alpha, am.transpose(), bm, beta, cm);
  } else {
    product(alpha, am.transpose(), bm.transpose(), beta, cm);
  }
}

namespace {

// The output columns ox whose input column ox*stride - pad + kx lies inside [0, width).
struct ValidRange {
  int64_t lo, hi;
};
ValidRange valid_outputs(int64_t offset, int64_t stride, int64_t size, int64_t out_size) {
  // input = ox * stride + offset must satisfy 0 <= input < size.
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t hi = size - offset <= 0 ? 0 : (size - offset - 1) / stride + 1;
  lo = std::min(lo, out_size);
  hi = std::clamp(hi, lo, out_size);
  return {lo, hi};
}

void check_geometry(const ConvGeometry& g, size_t x_size) {
  SYNC_CHECK(g.channels > 0 && g.height > 0 && g.width > 0 && g.kernel > 0 && g.stride > 0 &&
                 g.padding >= 0 && g.out_height() > 0 && g.out_width() > 0,
             "conv geometry C " << g.channels << " H " << g.height << " W " << g.width << " k "
                                << g.kernel << " s " << g.stride << " p " << g.padding);
  SYNC_CHECK(static_cast<int64_t>(x_size) == g.channels * g.height * g.width,
             "image of " << x_size << " values for C*H*W " << g.channels * g.height * g.width);
}

}  // namespace

void im2col(std::span<const float> x, const ConvGeometry& g, float* col, int64_t col_ld) {
  check_geometry(g, x.size());
  const int64_t k = g.kernel, s = g.stride, ho = g.out_height(), wo = g.out_width();
  SYNC_CHECK(col_ld >= ho * wo, "col_ld " << col_ld << " < " << ho * wo);
  for (int64_t c = 0; c < g.channels; ++c) {
    const float* plane = x.data() + c * g.height * g.width;
    for (int64_t ky = 0; ky < k; ++ky) {
      const ValidRange rows = valid_outputs(ky - g.padding, s, g.height, ho);
      for (int64_t kx = 0; kx < k; ++kx) {
        float* out = col + ((c * k + ky) * k + kx) * col_ld;
        const ValidRange cols = valid_outputs(kx - g.padding, s, g.width, wo);
        std::fill(out, out + rows.lo * wo, 0.0f);
        for (int64_t oy = rows.lo; oy < rows.hi; ++oy) {
          float* dst = out + oy * wo;
          const float* src = plane + (oy * s - g.padding + ky) * g.width;
          const int64_t shift = kx - g.padding;  // input column = ox * s + shift
          std::fill(dst, dst + cols.lo, 0.0f);
          if (s == 1) {
            std::memcpy(dst + cols.lo, src + cols.lo + shift,
                        static_cast<size_t>(cols.hi - cols.lo) * sizeof(float));
          } else {
            for (int64_t ox = cols.lo; ox < cols.hi; ++ox) dst[ox] = src[ox * s + shift];
          }
          std::fill(dst + cols.hi, dst + wo, 0.0f);
        }
        std::fill(out + rows.hi * wo, out + ho * wo, 0.0f);
      }
    }
  }
}

void col2im_add(const float* col, int64_t col_ld, const ConvGeometry& g, std::span<float> x) {
  check_geometry(g, x.size());
  const int64_t k = g.kernel, s = g.stride, ho = g.out_height(), wo = g.out_width();
  SYNC_CHECK(col_ld >= ho * wo, "col_ld " << col_ld << " < " << ho * wo);
  for (int64_t c = 0; c < g.channels; ++c) {
    float* plane = x.data() + c * g.height * g.width;
    for (int64_t ky = 0; ky < k; ++ky) {
      const ValidRange rows = valid_outputs(ky - g.padding, s, g.height, ho);
      for (int64_t kx = 0; kx < k; ++kx) {
        const float* in = col + ((c * k + ky) * k + kx) * col_ld;
        const ValidRange cols = valid_outputs(kx - g.padding, s, g.width, wo);
        for (int64_t oy = rows.lo; oy < rows.hi; ++oy) {
          const float* src = in + oy * wo;
          float* dst = plane + (oy * s - g.padding + ky) * g.width;
          const int64_t shift = kx - g.padding;
          for (int64_t ox = cols.lo; ox < cols.hi; ++ox) dst[ox * s + shift] += src[ox];
        }
      }
    }
  }
}

}  // namespace syncopate
