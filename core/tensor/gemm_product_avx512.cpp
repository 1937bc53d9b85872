// The GEMM product compiled for AVX-512 (F, DQ, VL, BW, with AVX2 and FMA: x86-64-v4; this file
// alone gets those flags, see CMakeLists.txt). As in gemm_product_avx2_fma.cpp, Eigen's
// namespace is renamed so that no template instantiated here can replace another build's copy.
// Eigen's AVX-512 kernel holds a 48x8 block of C in the 32 vector registers, against 24x4 in
// AVX2's 16: fewer loads and broadcasts per FMA, which is most of what is left at these shapes.
#include "core/tensor/gemm_product.hpp"

// GCC 12 reports false (maybe-)uninitialized warnings inside its own AVX-512 intrinsics
// (avx512fintrin.h's undefined-vector idiom), the first kind only under the ASan preset's flags.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#define Eigen syncopate_eigen_avx512
#include <Eigen/Core>

#if !defined(__AVX512F__) || !defined(__AVX512DQ__) || !defined(__AVX512VL__) || \
    !defined(__AVX512BW__) || !defined(__FMA__)
#error "gemm_product_avx512.cpp must be compiled with -mavx512f -mavx512dq -mavx512vl -mavx512bw"
#endif

#define SYNCOPATE_PRODUCT product_avx512
#include "core/tensor/gemm_product.inc"
