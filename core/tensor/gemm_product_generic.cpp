// The GEMM product for the build's own target (see gemm_product.hpp).
#include "core/tensor/gemm_product.hpp"

// GCC 12 reports false "may be used uninitialized" warnings inside Eigen's AVX-512 kernels.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>

#define SYNCOPATE_PRODUCT product_generic
#include "core/tensor/gemm_product.inc"
