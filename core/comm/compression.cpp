// Rounding of values and buffers to a wire format, and their 16-bit encodings.
//
// The buffer loops take the format's converter directly (inline, no branch: wire_bits.hpp), so
// that the compiler vectorises them; this file is compiled with -fno-trapping-math, without which
// GCC keeps half_to_float's selects as branches (nothing here reads the floating-point exception
// flags). fp16's subnormals shift each lane by its own count, which SSE2 cannot, so GCC also
// builds an AVX2 copy of each loop and picks one when the program loads (target_clones). Where
// the CPU converts to and from binary16 itself (x86's F16C: round to nearest even, overflow to
// infinity, subnormals, a NaN made quiet with its payload's top bits: the bits of float_to_half
// and half_to_float on every input), the fp16 loops use its instructions instead, 8 floats at a
// time: 0.07 against 0.9 ns per element and pass here (bench_kernels' BM_WireStep).
#include "core/comm/compression.hpp"

#include <atomic>

#include "core/base/check.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define SYNC_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#define SYNC_F16C 1
#else
#define SYNC_VECTOR_CLONES
#endif

namespace syncopate {
namespace {

enum class Loop { kRound, kAdd, kEncode, kDecode };

// One loop over n elements: dst (round, add: in place; decode: out), src (add: the addend;
// encode: in), half (encode: out; decode: in).
struct LoopArgs {
  float* __restrict dst;
  const float* __restrict src;
  uint16_t* __restrict half;
  size_t n;
};

SYNC_VECTOR_CLONES void portable_loop(Loop loop, LoopArgs a, bool bf16) {
  float* __restrict dst = a.dst;
  const float* __restrict src = a.src;
  uint16_t* __restrict half = a.half;
  const size_t n = a.n;
  switch (loop) {
    case Loop::kRound:
      if (bf16)
        for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(float_to_bf16(dst[i]));
      else
        for (size_t i = 0; i < n; ++i) dst[i] = half_to_float(float_to_half(dst[i]));
      return;
    case Loop::kAdd:
      if (bf16)
        for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(float_to_bf16(dst[i] + src[i]));
      else
        for (size_t i = 0; i < n; ++i) dst[i] = half_to_float(float_to_half(dst[i] + src[i]));
      return;
    case Loop::kEncode:
      if (bf16)
        for (size_t i = 0; i < n; ++i) half[i] = float_to_bf16(src[i]);
      else
        for (size_t i = 0; i < n; ++i) half[i] = float_to_half(src[i]);
      return;
    case Loop::kDecode:
      if (bf16)
        for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_float(half[i]);
      else
        for (size_t i = 0; i < n; ++i) dst[i] = half_to_float(half[i]);
      return;
  }
}

std::atomic<bool> g_fp16_hardware_allowed{true};

#if defined(SYNC_F16C)
// fp16 on F16C, 8 floats at a time; the rest (fewer than 8) on the portable loop.
__attribute__((target("avx,f16c"))) void f16c_loop(Loop loop, LoopArgs a) {
  constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  size_t i = 0;
  for (; i + 8 <= a.n; i += 8) {
    switch (loop) {
      case Loop::kRound: {
        const __m256 x = _mm256_loadu_ps(a.dst + i);
        _mm256_storeu_ps(a.dst + i, _mm256_cvtph_ps(_mm256_cvtps_ph(x, kNearest)));
        break;
      }
      case Loop::kAdd: {
        const __m256 x = _mm256_add_ps(_mm256_loadu_ps(a.dst + i), _mm256_loadu_ps(a.src + i));
        _mm256_storeu_ps(a.dst + i, _mm256_cvtph_ps(_mm256_cvtps_ph(x, kNearest)));
        break;
      }
      case Loop::kEncode:
        _mm_storeu_si128(reinterpret_cast<__m128i*>(a.half + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(a.src + i), kNearest));
        break;
      case Loop::kDecode:
        _mm256_storeu_ps(
            a.dst + i,
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a.half + i))));
        break;
    }
  }
  const LoopArgs rest{a.dst == nullptr ? nullptr : a.dst + i,
                      a.src == nullptr ? nullptr : a.src + i,
                      a.half == nullptr ? nullptr : a.half + i, a.n - i};
  portable_loop(loop, rest, /*bf16=*/false);
}

bool cpu_has_f16c() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx") && __builtin_cpu_supports("f16c");
  }();
  return has;
}
#endif

void run(Loop loop, LoopArgs a, WireFormat wire) {
#if defined(SYNC_F16C)
  if (wire == WireFormat::kFp16 && fp16_hardware()) return f16c_loop(loop, a);
#endif
  portable_loop(loop, a, wire == WireFormat::kBf16);
}

}  // namespace

bool fp16_hardware() {
#if defined(SYNC_F16C)
  return cpu_has_f16c() && g_fp16_hardware_allowed.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void allow_fp16_hardware(bool allowed) {
  g_fp16_hardware_allowed.store(allowed, std::memory_order_relaxed);
}

float round_to_wire(float x, WireFormat wire) {
  switch (wire) {
    case WireFormat::kFp32:
      return x;
    case WireFormat::kFp16:
      return half_to_float(float_to_half(x));
    case WireFormat::kBf16:
      return bf16_to_float(float_to_bf16(x));
  }
  SYNC_CHECK(false, "unknown wire format " << static_cast<int>(wire));
}

void round_to_wire(std::span<float> data, WireFormat wire) {
  if (wire != WireFormat::kFp32)
    run(Loop::kRound, {data.data(), nullptr, nullptr, data.size()}, wire);
}

void add_rounded(std::span<float> dst, std::span<const float> src, WireFormat wire) {
  SYNC_CHECK(dst.size() == src.size(), "dst " << dst.size() << " src " << src.size());
  if (wire == WireFormat::kFp32) {
    for (size_t i = 0; i < dst.size(); ++i) dst[i] += src[i];
    return;
  }
  run(Loop::kAdd, {dst.data(), src.data(), nullptr, dst.size()}, wire);
}

void encode_wire(std::span<const float> data, WireFormat wire, std::span<uint16_t> out) {
  SYNC_CHECK(wire != WireFormat::kFp32 && data.size() == out.size(),
             "wire " << static_cast<int>(wire) << " data " << data.size() << " out " << out.size());
  run(Loop::kEncode, {nullptr, data.data(), out.data(), data.size()}, wire);
}

void decode_wire(std::span<const uint16_t> data, WireFormat wire, std::span<float> out) {
  SYNC_CHECK(wire != WireFormat::kFp32 && data.size() == out.size(),
             "wire " << static_cast<int>(wire) << " data " << data.size() << " out " << out.size());
  run(Loop::kDecode, {out.data(), nullptr, const_cast<uint16_t*>(data.data()), data.size()}, wire);
}

}  // namespace syncopate
