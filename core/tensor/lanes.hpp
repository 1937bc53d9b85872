#pragma once
// N floats (and N int32 lanes) as GCC's and clang's vector extension, for hand-written loops
// whose width follows the CPU: each compiled copy of a function lowers them to its own registers
// (four SSE registers for 16 floats on baseline x86-64, two with AVX2, one with AVX-512).
//
// SYNCOPATE_VECTOR_CLONES before a function compiles it three times on x86-64, for the build's
// target, for x86-64-v3 (AVX2, FMA) and for x86-64-v4 (AVX-512), and the loader picks the copy
// that the CPU runs (target_clones, as glibc picks its string functions). What the function calls
// must be inlined into it to share its copy's target: helpers that hold the loop bodies are
// always_inline. A build whose target already has AVX-512, or another architecture, compiles one
// copy; so does a translation unit compiled with SYNCOPATE_KERNELS_BASELINE_ONLY, which the tests
// use to run the baseline copy on a CPU that would pick the other (tests/CMakeLists.txt,
// test_kernels_baseline).
#include <cstdint>

#if defined(__x86_64__) && !defined(__AVX512BW__) && !defined(SYNCOPATE_KERNELS_BASELINE_ONLY)
#define SYNCOPATE_VECTOR_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define SYNCOPATE_VECTOR_CLONES
#endif

namespace syncopate::lanes {

// Whether the kernels' loops take 16 lanes at a time (one AVX-512 register) rather than 8 (one
// AVX2 register, two SSE ones): where the CPU has AVX-512. In AVX2's 16 registers, vectors of 16
// floats spill (the direct convolution's weight gradient took three times as long as in passes
// of 8). A loop's lanes compute the same in either width, so the bits do not depend on it. The
// tests' build of the baseline copies (SYNCOPATE_KERNELS_BASELINE_ONLY) always takes 16, so that
// on a CPU without AVX-512, comparing it with the copy the loader picks compares the two widths.
// Internal linkage: that build and the library's differ here.
[[maybe_unused]] static bool sixteen_lanes() {
#if defined(__x86_64__) && !defined(SYNCOPATE_KERNELS_BASELINE_ONLY)
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
#else
  return true;
#endif
}

template <int N>
struct Lanes {
  typedef float F __attribute__((vector_size(4 * N)));
  typedef int32_t I __attribute__((vector_size(4 * N)));
};

// Through a copy of V's type aligned as a float and allowed to alias anything (as the
// intrinsics headers' unaligned types are): the pointers need not be aligned, and each copy of a
// function loads with its own target's widest moves. (A memcpy was expanded in 16-byte pieces
// in the AVX2 copy: two stores to the stack and one 32-byte load back, which stalled.) By
// reference, since passing or returning a vector wider than the baseline's registers by value is
// an ABI question the compilers warn about.
template <class V>
[[gnu::always_inline]] inline void load(V& v, const void* p) {
  typedef V Unaligned __attribute__((aligned(alignof(float)), may_alias));
  v = *static_cast<const Unaligned*>(p);
}
template <class V>
[[gnu::always_inline]] inline void store(void* p, const V& v) {
  typedef V Unaligned __attribute__((aligned(alignof(float)), may_alias));
  *static_cast<Unaligned*>(p) = v;
}

}  // namespace syncopate::lanes
