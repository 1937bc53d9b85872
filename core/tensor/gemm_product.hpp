#pragma once
// The blocked GEMM product behind gemm(): C (row-major) += alpha * op(A) * op(B), compiled twice,
// for the generic target and for AVX2 with FMA, and chosen at run time by what the CPU has (as
// OpenBLAS chooses its kernels). Internal to core/tensor.
#include <cstdint>

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

}  // namespace syncopate::gemm_detail
