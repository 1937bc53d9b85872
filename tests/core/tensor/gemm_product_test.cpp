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

TEST(GemmProduct, EveryKernelMatchesTheDoubleReferenceForEveryTranspose) {
  for (const gemm_detail::Kernel& kernel : usable_kernels())
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        EXPECT_LT(product_error(kernel.product, ta, tb), 1e-5)  // k eps / sqrt-ish bound
            << kernel.name << " " << ta << tb;
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
