#pragma once
// The blocked GEMM product behind gemm(): C (row-major) += alpha * op(A) * op(B), compiled for the
// generic target, for AVX2 with FMA and for AVX-512, and chosen at run time by what the CPU has
// (as OpenBLAS chooses its kernels), or by SYNCOPATE_GEMM_KERNEL. Internal to core/tensor.
#include <cstdint>
#include <string_view>

namespace syncopate::gemm_detail {

// op(A) is m x k (row-major when a_transposed is false), op(B) k x n; C is m x n, ld = ldc.
struct Product {
  bool a_transposed = false, b_transposed = false;
  int64_t m = 0, n = 0, k = 0;
  float alpha = 1;
  const float* a = nullptr;
  int64_t lda = 0;
  const float* b = nullptr;
  int64_t ldb = 0;
  float* c = nullptr;
  int64_t ldc = 0;
};

void product_generic(const Product& p);
// Only where the CPU has AVX2 and FMA (cpu_has_avx2_fma()); absent from builds for other
// targets, and from those whose -march already includes them (the generic path is then AVX2).
void product_avx2_fma(const Product& p);
// Only where the CPU has AVX-512 F, DQ, VL and BW (x86-64-v4); absent where the build targets a
// CPU (SYNCOPATE_MARCH) or is unoptimised.
void product_avx512(const Product& p);

using ProductFn = void (*)(const Product&);
struct Kernel {
  std::string_view name;  // "generic", "avx2_fma" or "avx512"
  ProductFn product;
};
// The kernel gemm() runs: `requested` names one ("generic", "avx2_fma", "avx512"), or is empty
// or "auto" for the fastest that this build has and this CPU runs. Throws UserError for an
// unknown name, or for a kernel that the build lacks or the CPU cannot run.
Kernel choose_kernel(std::string_view requested);

}  // namespace syncopate::gemm_detail
