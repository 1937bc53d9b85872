// The two GEMM product kernels (generic and AVX2+FMA, core/tensor/gemm_product.hpp) against a
// double-precision reference, and the choice between them.
#include "core/tensor/gemm_product.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/base/rng.hpp"
#include "core/tensor/gemm.hpp"

namespace syncopate {
namespace {

bool cpu_has_avx2_fma() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

std::vector<float> values(size_t n, uint64_t seed) {
  Rng rng({.seed = seed});
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

// Largest |got - want| / (sum_l |a_il b_lj|) over C, for op(A) op(B) with the given transposes.
double product_error(void (*kernel)(const gemm_detail::Product&), bool ta, bool tb) {
  const int64_t m = 67, n = 45, k = 301, pad = 5;  // beyond one register block, odd edges
  const int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
  const auto a = values(static_cast<size_t>((ta ? k : m) * lda), 1);
  const auto b = values(static_cast<size_t>((tb ? n : k) * ldb), 2);
  std::vector<float> c(static_cast<size_t>(m * ldc), 0.0f);
  kernel({ta, tb, m, n, k, 1.0f, a.data(), lda, b.data(), ldb, c.data(), ldc});
  double worst = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, scale = 0;
      for (int64_t l = 0; l < k; ++l) {
        const double x =
            ta ? a[static_cast<size_t>(l * lda + i)] : a[static_cast<size_t>(i * lda + l)];
        const double y =
            tb ? b[static_cast<size_t>(j * ldb + l)] : b[static_cast<size_t>(l * ldb + j)];
        sum += x * y;
        scale += std::abs(x * y);
      }
      worst = std::max(worst, std::abs(c[static_cast<size_t>(i * ldc + j)] - sum) / scale);
    }
  }
  return worst;
}

TEST(GemmProduct, BothKernelsMatchTheDoubleReferenceForEveryTranspose) {
  std::vector<void (*)(const gemm_detail::Product&)> kernels = {gemm_detail::product_generic};
#if defined(SYNCOPATE_GEMM_AVX2_FMA)
  if (cpu_has_avx2_fma()) kernels.push_back(gemm_detail::product_avx2_fma);
#endif
  for (auto kernel : kernels)
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        EXPECT_LT(product_error(kernel, ta, tb), 1e-5) << ta << tb;  // k eps / sqrt-ish bound
}

TEST(GemmProduct, TheFastestKernelTheCpuHasIsChosen) {
#if defined(SYNCOPATE_GEMM_AVX2_FMA)
  EXPECT_EQ(gemm_kernel(), cpu_has_avx2_fma() ? "avx2_fma" : "generic");
#else
  EXPECT_EQ(gemm_kernel(), "generic");
#endif
}

}  // namespace
}  // namespace syncopate
