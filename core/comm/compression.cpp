// Rounding of values and buffers to a wire format, and their 16-bit encodings.
//
// The portable buffer loops take the format's converter directly (inline, no branch:
// wire_bits.hpp), so that the compiler vectorises them; this file is compiled with
// -fno-trapping-math, without which GCC keeps half_to_float's selects as branches (nothing here
// reads the floating-point exception flags). fp16's subnormals shift each lane by its own count,
// which SSE2 cannot, so GCC also builds an AVX2 copy of each loop and picks one when the program
// loads (target_clones). On x86 CPUs with AVX2 and F16C both formats run on intrinsics instead,
// 8 or 16 floats at a time: fp16 on the CPU's own conversions (F16C: round to nearest even,
// overflow to infinity, subnormals, a NaN made quiet with its payload's top bits: the bits of
// float_to_half and half_to_float on every input), bf16 on float_to_bf16's integer arithmetic
// (GCC's own vector loops narrow to 16 bits and widen back slowly). Here, a step over 1 MiB
// (bench_kernels' BM_WireStep): see the README's "Compression".
#include "core/comm/compression.hpp"

#include <atomic>

#include "core/base/check.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define SYNC_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#define SYNC_INTRINSICS __attribute__((target("avx2,f16c")))
#else
#define SYNC_VECTOR_CLONES
#endif

namespace syncopate {
namespace {

using wire_bits::round_to_bf16;

enum class Loop { kRound, kAdd, kEncode, kDecode, kAddDecoded };

// One loop over n elements: dst (round, add, add decoded: in place; decode: out), src (add: the
// addend; encode: in), half (encode: out; decode, add decoded: in).
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
        for (size_t i = 0; i < n; ++i) dst[i] = round_to_bf16(dst[i]);
      else
        for (size_t i = 0; i < n; ++i) dst[i] = half_to_float(float_to_half(dst[i]));
      return;
    case Loop::kAdd:
      if (bf16)
        for (size_t i = 0; i < n; ++i) dst[i] = round_to_bf16(dst[i] + src[i]);
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
    case Loop::kAddDecoded:
      if (bf16)
        for (size_t i = 0; i < n; ++i) dst[i] = round_to_bf16(dst[i] + bf16_to_float(half[i]));
      else
        for (size_t i = 0; i < n; ++i)
          dst[i] = half_to_float(float_to_half(dst[i] + half_to_float(half[i])));
      return;
  }
}

std::atomic<bool> g_intrinsics_allowed{true};

#if defined(SYNC_INTRINSICS)
LoopArgs advanced(LoopArgs a, size_t i) {
  return {a.dst == nullptr ? nullptr : a.dst + i, a.src == nullptr ? nullptr : a.src + i,
          a.half == nullptr ? nullptr : a.half + i, a.n - i};
}

// A format's conversions: round 8 floats (to floats of the format), encode 16, decode 8.
struct Fp16Lanes {
  static constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  SYNC_INTRINSICS static __m256 round(__m256 x) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(x, kNearest));
  }
  // 16 floats from `in`.
  SYNC_INTRINSICS static void encode(const float* in, uint16_t* out) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in), kNearest));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8),
                     _mm256_cvtps_ph(_mm256_loadu_ps(in + 8), kNearest));
  }
  SYNC_INTRINSICS static __m256 decode(const uint16_t* in) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in)));
  }
};

struct Bf16Lanes {
  // float_to_bf16(x) in each lane's top 16 bits (the low ones to be dropped).
  SYNC_INTRINSICS static __m256i top_bits(__m256 x) {
    const __m256i bits = _mm256_castps_si256(x);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
    const __m256i rounded =
        _mm256_add_epi32(bits, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), lsb));
    const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
    const __m256i is_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f800000));
    const __m256i quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x00400000));
    return _mm256_blendv_epi8(rounded, quiet, is_nan);
  }
  SYNC_INTRINSICS static __m256 round(__m256 x) {
    return _mm256_castsi256_ps(_mm256_and_si256(top_bits(x), _mm256_set1_epi32(-65536)));
  }
  // 16 floats from `in`. Every lane holds a value below 2^16, so the saturating pack is exact;
  // it packs by 128-bit halves, and the permute puts them in order.
  SYNC_INTRINSICS static void encode(const float* in, uint16_t* out) {
    const __m256i low = _mm256_srli_epi32(top_bits(_mm256_loadu_ps(in)), 16);
    const __m256i high = _mm256_srli_epi32(top_bits(_mm256_loadu_ps(in + 8)), 16);
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(low, high), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), packed);
  }
  SYNC_INTRINSICS static __m256 decode(const uint16_t* in) {
    const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(values), 16));
  }
};

// One loop on a format's lanes, 8 floats at a time, 16 to encode (one instance per loop, so that
// the constants stay out of it); returns how many floats it did.
template <class Lanes, Loop kLoop>
SYNC_INTRINSICS size_t lanes_loop(LoopArgs a) {
  constexpr size_t kStep = kLoop == Loop::kEncode ? 16 : 8;
  size_t i = 0;
  for (; i + kStep <= a.n; i += kStep) {
    if constexpr (kLoop == Loop::kRound) {
      _mm256_storeu_ps(a.dst + i, Lanes::round(_mm256_loadu_ps(a.dst + i)));
    } else if constexpr (kLoop == Loop::kAdd) {
      const __m256 x = _mm256_add_ps(_mm256_loadu_ps(a.dst + i), _mm256_loadu_ps(a.src + i));
      _mm256_storeu_ps(a.dst + i, Lanes::round(x));
    } else if constexpr (kLoop == Loop::kEncode) {
      Lanes::encode(a.src + i, a.half + i);
    } else if constexpr (kLoop == Loop::kDecode) {
      _mm256_storeu_ps(a.dst + i, Lanes::decode(a.half + i));
    } else {
      const __m256 x = _mm256_add_ps(_mm256_loadu_ps(a.dst + i), Lanes::decode(a.half + i));
      _mm256_storeu_ps(a.dst + i, Lanes::round(x));
    }
  }
  return i;
}

// A loop on a format's lanes; the rest (fewer than 16 floats) on the portable loop.
template <class Lanes>
void intrinsic_loop(Loop loop, LoopArgs a, bool bf16) {
  size_t done = 0;
  switch (loop) {
    case Loop::kRound:
      done = lanes_loop<Lanes, Loop::kRound>(a);
      break;
    case Loop::kAdd:
      done = lanes_loop<Lanes, Loop::kAdd>(a);
      break;
    case Loop::kEncode:
      done = lanes_loop<Lanes, Loop::kEncode>(a);
      break;
    case Loop::kDecode:
      done = lanes_loop<Lanes, Loop::kDecode>(a);
      break;
    case Loop::kAddDecoded:
      done = lanes_loop<Lanes, Loop::kAddDecoded>(a);
      break;
  }
  portable_loop(loop, advanced(a, done), bf16);
}

bool cpu_has_intrinsics() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  }();
  return has;
}
#endif

void run(Loop loop, LoopArgs a, WireFormat wire) {
  const bool bf16 = wire == WireFormat::kBf16;
#if defined(SYNC_INTRINSICS)
  if (wire_intrinsics())
    return bf16 ? intrinsic_loop<Bf16Lanes>(loop, a, bf16)
                : intrinsic_loop<Fp16Lanes>(loop, a, bf16);
#endif
  portable_loop(loop, a, bf16);
}

}  // namespace

bool wire_intrinsics() {
#if defined(SYNC_INTRINSICS)
  return cpu_has_intrinsics() && g_intrinsics_allowed.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void allow_wire_intrinsics(bool allowed) {
  g_intrinsics_allowed.store(allowed, std::memory_order_relaxed);
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

void add_decoded(std::span<float> dst, std::span<const uint16_t> src, WireFormat wire) {
  SYNC_CHECK(wire != WireFormat::kFp32 && dst.size() == src.size(),
             "wire " << static_cast<int>(wire) << " dst " << dst.size() << " src " << src.size());
  run(Loop::kAddDecoded, {dst.data(), nullptr, const_cast<uint16_t*>(src.data()), dst.size()},
      wire);
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
