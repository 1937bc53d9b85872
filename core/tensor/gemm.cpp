// GEMM over row-major floats through Eigen (the product kernel chosen for the CPU at run time,
// see gemm_product.hpp), and the im2col / col2im transforms.
#include "core/tensor/gemm.hpp"

// GCC 12 reports false "may be used uninitialized" warnings inside Eigen's AVX-512 kernels.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/base/check.hpp"
#include "core/tensor/gemm_product.hpp"

namespace syncopate {
namespace {

using RowMajorMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MutableMap = Eigen::Map<RowMajorMatrix, Eigen::Unaligned, Eigen::OuterStride<>>;

// The kernel for this CPU, chosen at the first product (SYNCOPATE_GEMM_KERNEL, see
// gemm_product.hpp); a bad request throws there, and again at the next call.
const gemm_detail::Kernel& active_kernel() {
  static const gemm_detail::Kernel kernel = [] {
    const char* requested = std::getenv("SYNCOPATE_GEMM_KERNEL");
    return gemm_detail::choose_kernel(requested ? requested : "");
  }();
  return kernel;
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
  if (beta == 0.0f) {
    cm.setZero();  // not a scaling: NaN or Inf in C must not survive
  } else if (beta != 1.0f) {
    cm *= beta;
  }
  if (k == 0 || alpha == 0.0f) return;
  active_kernel().product({ta, tb, m, n, k, alpha, a.data, a.ld, b.data, b.ld, c.data, c.ld});
}

std::string_view gemm_kernel() { return active_kernel().name; }

namespace gemm_detail {

Kernel choose_kernel(std::string_view requested) {
  struct Candidate {
    Kernel kernel;
    bool built, runs;
  };
  bool avx2_fma = false, avx512 = false;
#if defined(__x86_64__)
  __builtin_cpu_init();
  avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  avx512 = avx2_fma && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw");
#endif
  // Fastest first.
  const Candidate candidates[] = {
#if defined(SYNCOPATE_GEMM_AVX512)
    {{"avx512", product_avx512}, true, avx512},
#else
    {{"avx512", nullptr}, false, avx512},
#endif
#if defined(SYNCOPATE_GEMM_AVX2_FMA)
    {{"avx2_fma", product_avx2_fma}, true, avx2_fma},
#else
    {{"avx2_fma", nullptr}, false, avx2_fma},
#endif
    {{"generic", product_generic}, true, true},
  };
  const bool automatic = requested.empty() || requested == "auto";
  std::string usable = "auto";
  for (const Candidate& c : candidates) {
    if (automatic && c.built && c.runs) return c.kernel;
    if (c.built && c.runs) usable += ", " + std::string(c.kernel.name);
  }
  for (const Candidate& c : candidates) {
    if (c.kernel.name != requested) continue;
    if (c.built && c.runs) return c.kernel;
    throw UserError("SYNCOPATE_GEMM_KERNEL = \"" + std::string(requested) + "\": " +
                    (c.built ? "this CPU cannot run it"
                             : "not in this build (the AVX kernels are built only into "
                               "optimised builds for generic x86-64, SYNCOPATE_MARCH empty)") +
                    "; usable here: " + usable);
  }
  throw UserError(
      "SYNCOPATE_GEMM_KERNEL = \"" + std::string(requested) +
      "\": unknown kernel; allowed: auto, avx512, avx2_fma, generic (usable here: " + usable + ")");
}

}  // namespace gemm_detail

void add_row_sums(const MatrixView& a, std::span<float> sums) {
  check_view("add_row_sums", a.rows, a.cols, a.ld, a.data);
  SYNC_CHECK(static_cast<int64_t>(sums.size()) == a.rows, sums.size() << " sums, " << a.rows);
  if (a.rows == 0 || a.cols == 0) return;
  // Not Eigen's rowwise().sum(): its vectorised reduction peels elements until the row start is
  // aligned, so the summation order (and the rounding) would depend on where the row happens to
  // sit in memory, and the same data could give different sums in two runs. Here the order is
  // fixed: 16 interleaved partial sums (which the compiler vectorises), then a fixed tree.
  constexpr int64_t kLanes = 16;
  for (int64_t r = 0; r < a.rows; ++r) {
    const float* row = a.data + r * a.ld;
    float lanes[kLanes] = {};
    int64_t j = 0;
    for (; j + kLanes <= a.cols; j += kLanes)
      for (int64_t l = 0; l < kLanes; ++l) lanes[l] += row[j + l];
    for (int64_t width = kLanes / 2; width > 0; width /= 2)
      for (int64_t l = 0; l < width; ++l) lanes[l] += lanes[l + width];
    float total = lanes[0];
    for (; j < a.cols; ++j) total += row[j];
    sums[static_cast<size_t>(r)] += total;
  }
}

void add_column_sums(const MatrixView& a, std::span<float> sums) {
  check_view("add_column_sums", a.rows, a.cols, a.ld, a.data);
  SYNC_CHECK(static_cast<int64_t>(sums.size()) == a.cols, sums.size() << " sums, " << a.cols);
  if (a.rows == 0 || a.cols == 0) return;
  // Row after row into the sums: each column is summed in row order, whatever the alignment
  // (Eigen's colwise().sum() peels differently depending on the address, so its rounding does
  // too). The inner loop is elementwise and vectorises without reassociation.
  float* out = sums.data();
  for (int64_t r = 0; r < a.rows; ++r) {
    const float* row = a.data + r * a.ld;
    for (int64_t j = 0; j < a.cols; ++j) out[j] += row[j];
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

// Stride 1 with an output as large as the input ("same" padding, e.g. 3x3 with padding 1): col
// row (c, ky, kx) is image plane c shifted by (ky - pad) rows and (kx - pad) columns, so it is
// one contiguous copy; only the columns and rows that fall into the padding need zeros.
bool is_same_stride1(const ConvGeometry& g) {
  return g.stride == 1 && g.out_height() == g.height && g.out_width() == g.width;
}

// For col row (ky, kx) of a same-size stride-1 convolution: the valid output rows, the valid
// output columns, and the flat shift from output index to input index.
struct Shifted {
  ValidRange rows, cols;
  int64_t shift;
};
Shifted shifted(const ConvGeometry& g, int64_t ky, int64_t kx) {
  return {valid_outputs(ky - g.padding, 1, g.height, g.height),
          valid_outputs(kx - g.padding, 1, g.width, g.width),
          (ky - g.padding) * g.width + (kx - g.padding)};
}

// Zeros the entries of one col row (Ho x Wo, ld w) in the padding columns of the valid rows: a
// column or two, written element by element down the column. Per-row fills of one or two floats
// each became a memset call (the compiler turns such loops into calls), 2,700 of them per image
// of the cnn's second convolution, most of im2col's time.
void zero_columns(float* row, int64_t w, const Shifted& sh) {
  for (int64_t ox = 0; ox < sh.cols.lo; ++ox)
    for (int64_t oy = sh.rows.lo; oy < sh.rows.hi; ++oy) row[oy * w + ox] = 0.0f;
  for (int64_t ox = sh.cols.hi; ox < w; ++ox)
    for (int64_t oy = sh.rows.lo; oy < sh.rows.hi; ++oy) row[oy * w + ox] = 0.0f;
}

void im2col_same_stride1(const float* x, const ConvGeometry& g, float* col, int64_t col_ld) {
  const int64_t h = g.height, w = g.width, plane = h * w, k = g.kernel;
  for (int64_t c = 0; c < g.channels; ++c) {
    const float* in = x + c * plane;
    for (int64_t ky = 0; ky < k; ++ky) {
      for (int64_t kx = 0; kx < k; ++kx) {
        float* out = col + ((c * k + ky) * k + kx) * col_ld;
        const Shifted sh = shifted(g, ky, kx);
        const int64_t begin = std::max(sh.rows.lo * w, -sh.shift);
        const int64_t end = std::min(sh.rows.hi * w, plane - sh.shift);
        std::fill(out, out + begin, 0.0f);
        std::memcpy(out + begin, in + begin + sh.shift,
                    static_cast<size_t>(end - begin) * sizeof(float));
        std::fill(out + end, out + plane, 0.0f);
        zero_columns(out, w, sh);
      }
    }
  }
}

void col2im_same_stride1(float* col, int64_t col_ld, const ConvGeometry& g, float* x) {
  const int64_t h = g.height, w = g.width, plane = h * w, k = g.kernel;
  for (int64_t c = 0; c < g.channels; ++c) {
    float* out = x + c * plane;
    for (int64_t ky = 0; ky < k; ++ky) {
      for (int64_t kx = 0; kx < k; ++kx) {
        float* in = col + ((c * k + ky) * k + kx) * col_ld;
        const Shifted sh = shifted(g, ky, kx);
        // Zero the entries that belong to padding columns, then add one contiguous range.
        zero_columns(in, w, sh);
        const int64_t begin = std::max(sh.rows.lo * w, -sh.shift);
        const int64_t end = std::min(sh.rows.hi * w, plane - sh.shift);
        float* dst = out + sh.shift;
        for (int64_t i = begin; i < end; ++i) dst[i] += in[i];
      }
    }
  }
}

}  // namespace

void im2col(std::span<const float> x, const ConvGeometry& g, float* col, int64_t col_ld) {
  check_geometry(g, x.size());
  const int64_t k = g.kernel, s = g.stride, ho = g.out_height(), wo = g.out_width();
  SYNC_CHECK(col_ld >= ho * wo, "col_ld " << col_ld << " < " << ho * wo);
  if (is_same_stride1(g)) {
    im2col_same_stride1(x.data(), g, col, col_ld);
    return;
  }
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

void col2im_add(float* col, int64_t col_ld, const ConvGeometry& g, std::span<float> x) {
  check_geometry(g, x.size());
  const int64_t k = g.kernel, s = g.stride, ho = g.out_height(), wo = g.out_width();
  SYNC_CHECK(col_ld >= ho * wo, "col_ld " << col_ld << " < " << ho * wo);
  if (is_same_stride1(g)) {
    col2im_same_stride1(col, col_ld, g, x.data());
    return;
  }
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
          if (s == 1) {
            for (int64_t ox = cols.lo; ox < cols.hi; ++ox) dst[ox + shift] += src[ox];
          } else {
            for (int64_t ox = cols.lo; ox < cols.hi; ++ox) dst[ox * s + shift] += src[ox];
          }
        }
      }
    }
  }
}

}  // namespace syncopate
