#pragma once
// Four floats as GCC's and clang's vector extension: plain SSE on the generic x86-64 target, NEON
// on ARM. For Winograd's 4x4 transposes; loops whose width follows the CPU use lanes.hpp.
#include <cstring>

namespace syncopate::vec4 {

typedef float V4 __attribute__((vector_size(16)));

inline V4 load(const float* p) {
  V4 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, V4 v) { std::memcpy(p, &v, sizeof v); }

}  // namespace syncopate::vec4
