// The GEMM product kernels (generic, AVX2+FMA and AVX-512, core/tensor/gemm_product.hpp) against
// a double-precision reference, and the choice between them.
#include "core/tensor/gemm_product.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/base/check.hpp"
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

bool cpu_has_avx512() {
#if defined(__x86_64__)
  return cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512bw");
#else
  return false;
#endif
}

// Every kernel this build has and this CPU runs.
std::vector<gemm_detail::Kernel> usable_kernels() {
  std::vector<gemm_detail::Kernel> kernels = {{"generic", gemm_detail::product_generic}};
#if defined(SYNCOPATE_GEMM_AVX2_FMA)
  if (cpu_has_avx2_fma()) kernels.push_back({"avx2_fma", gemm_detail::product_avx2_fma});
#endif
#if defined(SYNCOPATE_GEMM_AVX512)
  if (cpu_has_avx512()) kernels.push_back({"avx512", gemm_detail::product_avx512});
#endif
  return kernels;
}

std::vector<float> values(size_t n, uint64_t seed) {
  Rng rng({.seed = seed});
  std::vector<float> v(n);
  for (float& x : v) x = rng.normal();
  return v;
}

struct Shape3 {
  int64_t m, n, k;
};

// Largest |got - want| / (sum_l |a_il b_lj| + |c_ij|) over C, for C += alpha op(A) op(B) with
// the given transposes, C starting from `c0` everywhere; infinite where a row's pad changed.
double product_error(void (*kernel)(const gemm_detail::Product&), bool ta, bool tb,
                     Shape3 shape = {67, 45, 301},  // beyond one register block, odd edges
                     float alpha = 1.0f, float c0 = 0.0f) {
  const int64_t m = shape.m, n = shape.n, k = shape.k, pad = 5;
  const int64_t lda = (ta ? m : k) + pad, ldb = (tb ? k : n) + pad, ldc = n + pad;
  const auto a = values(static_cast<size_t>((ta ? k : m) * lda), 1);
  const auto b = values(static_cast<size_t>((tb ? n : k) * ldb), 2);
  std::vector<float> c(static_cast<size_t>(m * ldc), c0);
  kernel({ta, tb, m, n, k, alpha, a.data(), lda, b.data(), ldb, c.data(), ldc});
  double worst = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = c0, scale = std::abs(c0);
      for (int64_t l = 0; l < k; ++l) {
        const double x =
            ta ? a[static_cast<size_t>(l * lda + i)] : a[static_cast<size_t>(i * lda + l)];
        const double y =
            tb ? b[static_cast<size_t>(j * ldb + l)] : b[static_cast<size_t>(l * ldb + j)];
        sum += alpha * x * y;
        scale += std::abs(alpha * x * y);
      }
      worst = std::max(worst, std::abs(c[static_cast<size_t>(i * ldc + j)] - sum) / scale);
    }
    for (int64_t j = n; j < ldc; ++j)  // the pad past each row is not C's: never written
      if (c[static_cast<size_t>(i * ldc + j)] != c0) return INFINITY;
  }
  return worst;
}

TEST(GemmProduct, EveryKernelMatchesTheDoubleReferenceForEveryTranspose) {
  for (const gemm_detail::Kernel& kernel : usable_kernels())
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        EXPECT_LT(product_error(kernel.product, ta, tb), 1e-5)  // k eps / sqrt-ish bound
            << kernel.name << " " << ta << tb;
}

// Products whose op(B) fits the first-level cache take the direct path (no packing) on the
// AVX-512 kernel, Eigen's on the others: Winograd's shapes, and odd ones that leave partial
// register blocks and columns past the last packet. It
// accumulates into C, scaled by alpha, as the packed path does; pads between rows stay untouched.
TEST(GemmProduct, SmallProductsMatchTheDoubleReference) {
  const Shape3 shapes[] = {{98, 64, 32}, {98, 32, 64}, {64, 32, 98}, {7, 37, 13},
                           {5, 16, 3},   {1, 48, 1},   {9, 100, 81}, {3, 17, 200}};
  for (const gemm_detail::Kernel& kernel : usable_kernels())
    for (bool ta : {false, true})
      for (const Shape3& s : shapes) {
        EXPECT_LT(product_error(kernel.product, ta, false, s), 1e-5)
            << kernel.name << " ta " << ta << " " << s.m << "x" << s.n << "x" << s.k;
        EXPECT_LT(product_error(kernel.product, ta, false, s, 0.5f, 3.0f), 1e-5)
            << kernel.name << " ta " << ta << " " << s.m << "x" << s.n << "x" << s.k
            << ", alpha 0.5 into C = 3";
      }
}

TEST(GemmProduct, TheFastestKernelTheCpuHasIsChosen) {
  const std::string_view fastest = usable_kernels().back().name;
  EXPECT_EQ(gemm_detail::choose_kernel("").name, fastest);
  EXPECT_EQ(gemm_detail::choose_kernel("auto").name, fastest);
  // gemm() runs the automatic choice unless SYNCOPATE_GEMM_KERNEL names another.
  const char* pinned = std::getenv("SYNCOPATE_GEMM_KERNEL");
  EXPECT_EQ(gemm_kernel(), pinned ? std::string_view(pinned) : fastest);
#if !defined(SYNCOPATE_GEMM_AVX2_FMA)
  EXPECT_EQ(fastest, "generic");
#endif
}

TEST(GemmProduct, SyncopateGemmKernelPinsAnyUsableKernel) {
  for (const gemm_detail::Kernel& kernel : usable_kernels()) {
    const gemm_detail::Kernel chosen = gemm_detail::choose_kernel(kernel.name);
    EXPECT_EQ(chosen.name, kernel.name);
    EXPECT_EQ(chosen.product, kernel.product);
  }
}

TEST(GemmProduct, AnUnknownOrUnusableKernelIsRefusedByName) {
  const auto usable = usable_kernels();
  std::string listed = "usable here: auto";  // fastest first
  for (auto k = usable.rbegin(); k != usable.rend(); ++k) listed += ", " + std::string(k->name);
  try {
    gemm_detail::choose_kernel("avx1024");
    FAIL() << "an unknown kernel was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("SYNCOPATE_GEMM_KERNEL = \"avx1024\": unknown kernel"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(listed + ")"), std::string::npos) << e.what();
  }
  // A kernel that is named but not usable here: the build lacks it or the CPU cannot run it.
  for (std::string_view name : {"avx2_fma", "avx512"}) {
    const bool is_usable = std::any_of(
        usable.begin(), usable.end(), [&](const gemm_detail::Kernel& k) { return k.name == name; });
    if (is_usable) continue;
    EXPECT_THROW(gemm_detail::choose_kernel(name), UserError) << name;
  }
}

}  // namespace
}  // namespace syncopate
