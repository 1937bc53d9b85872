// The GEMM product compiled for AVX2 with FMA (this file alone gets -mavx2 -mfma, see
// CMakeLists.txt). Eigen's namespace is renamed here, so that its templates instantiated for
// AVX2 are distinct symbols from the generic build's: otherwise the linker would keep one copy
// of each and could run AVX2 code on a CPU without it, or generic code in the fast path.
// tests/build_checks checks that this object defines no symbol outside those namespaces.
#include "core/tensor/gemm_product.hpp"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#define Eigen syncopate_eigen_avx2_fma
#include <Eigen/Core>

#if !defined(__AVX2__) || !defined(__FMA__)
#error "gemm_product_avx2_fma.cpp must be compiled with -mavx2 -mfma"
#endif

#define SYNCOPATE_PRODUCT product_avx2_fma
#include "core/tensor/gemm_product.inc"
