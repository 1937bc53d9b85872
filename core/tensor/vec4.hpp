#pragma once
// Four floats (and four int32 lanes) as GCC's and clang's vector extension: plain SSE on the
// generic x86-64 target, NEON on ARM. For the short hand-written loops that the compilers leave
// scalar (several output pointers, interleaved stores); the GEMM has its own kernels.
#include <cstdint>
#include <cstring>

namespace syncopate::vec4 {

typedef float V4 __attribute__((vector_size(16)));
typedef int32_t V4i __attribute__((vector_size(16)));

inline V4 load(const float* p) {
  V4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline V4i load(const int32_t* p) {
  V4i v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, V4 v) { std::memcpy(p, &v, sizeof v); }

// v where the mask's lane is all ones (a comparison's true), +0 where it is 0.
inline V4 keep(V4 v, V4i mask) { return reinterpret_cast<V4>(reinterpret_cast<V4i>(v) & mask); }

}  // namespace syncopate::vec4
