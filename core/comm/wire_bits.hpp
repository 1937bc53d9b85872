#pragma once
// The fp16 and bf16 converters (round to nearest even), as inline functions that compile for
// the host and, under nvcc, for the device: the CUDA backend's 16-bit collectives round with the
// very code that core/comm/compression.cpp uses, so a GPU gives the CPU's bits (a conversion
// keeps a NaN's payload on both; the GPU's arithmetic returns its canonical NaN, so a NaN that a
// sum produced is only NaN). Plain integer arithmetic on the float's bits; no floating-point
// environment is read. fp16's converters give the bits of x86's F16C instructions on every
// input (all 2^32 floats and 2^16 halves compared), which compression.cpp uses where it can.
#include <cstdint>
#if !defined(__CUDA_ARCH__)
#include <bit>
#endif

#if defined(__CUDACC__)
#define SYNC_WIRE_FN __host__ __device__ inline
#else
#define SYNC_WIRE_FN inline
#endif

namespace syncopate::wire_bits {

SYNC_WIRE_FN uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return std::bit_cast<uint32_t>(x);
#endif
}

SYNC_WIRE_FN float float_of(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  return std::bit_cast<float>(bits);
#endif
}

// Rounds `value >> shift` to nearest, ties to even (shift in 1..31).
SYNC_WIRE_FN uint32_t shift_round_even(uint32_t value, uint32_t shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((uint32_t{1} << shift) - 1);
  const uint32_t half = uint32_t{1} << (shift - 1);
  return kept + ((rest > half ? 1u : 0u) | (rest == half ? kept & 1 : 0u));
}

// IEEE 754 binary16: overflow to infinity (|x| >= 65520), subnormals below 2^-14, NaN stays NaN
// (quiet, sign and the payload's top bits kept). Every case is computed and one selected, with
// no branch: a loop of conversions vectorises.
SYNC_WIRE_FN uint16_t float_to_half(float x) {
  const uint32_t bits = bits_of(x);
  const uint32_t sign = (bits >> 16) & 0x8000;
  const uint32_t magnitude = bits & 0x7fffffff;
  const uint32_t exponent = magnitude >> 23;
  // NaN: quiet, the payload's top bits kept.
  const uint32_t nan = 0x7e00 | ((magnitude >> 13) & 0x3ff);
  // Below 2^-14: a half subnormal (or zero) m * 2^-24. value = mantissa * 2^(exponent - 150), so
  // m = mantissa >> (126 - exponent), rounded; below 2^-26 (a shift over 25) that is zero, as
  // is a shift of 31, the largest defined, which stands in for every larger one.
  const uint32_t mantissa = (magnitude & 0x7fffff) | 0x800000;
  const uint32_t shift = exponent >= 95 && exponent <= 125 ? 126 - exponent : 31;
  const uint32_t subnormal = shift_round_even(mantissa, shift);
  // Normal: rebias the exponent (127 -> 15), round the 23-bit mantissa to 10 bits; a carry
  // moves into the exponent, which is the right result.
  const uint32_t normal = shift_round_even(magnitude - (uint32_t{112} << 23), 13);
  const uint32_t value = magnitude > 0x7f800000    ? nan
                         : magnitude >= 0x477ff000 ? 0x7c00  // >= 65520: infinity
                         : exponent < 113          ? subnormal
                                                   : normal;
  return static_cast<uint16_t>(sign | value);
}

SYNC_WIRE_FN float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  // Infinity, or NaN made quiet with its payload (as float_to_half and x86's F16C do).
  const uint32_t special = 0x7f800000 | (mantissa << 13) | (mantissa != 0 ? 0x400000u : 0u);
  // Zero or subnormal: mantissa * 2^-24, exact in float.
  const uint32_t subnormal = bits_of(static_cast<float>(static_cast<int32_t>(mantissa)) * 0x1p-24f);
  const uint32_t normal = ((exponent + 112) << 23) | (mantissa << 13);
  return float_of(sign | (exponent == 0x1f ? special : exponent == 0 ? subnormal : normal));
}

// bfloat16, the top 16 bits of a float; NaN stays NaN (quiet). No branch, as float_to_half.
SYNC_WIRE_FN uint16_t float_to_bf16(float x) {
  const uint32_t bits = bits_of(x);
  const uint32_t nan = (bits >> 16) | 0x0040;
  // A carry out of the mantissa moves into the exponent (to infinity past the largest float).
  const uint32_t rounded = (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;
  return static_cast<uint16_t>((bits & 0x7fffffff) > 0x7f800000 ? nan : rounded);
}

SYNC_WIRE_FN float bf16_to_float(uint16_t b) { return float_of(static_cast<uint32_t>(b) << 16); }

// bf16_to_float(float_to_bf16(x)) without the 16-bit value between (a vector loop then needs no
// narrowing and widening).
SYNC_WIRE_FN float round_to_bf16(float x) {
  const uint32_t bits = bits_of(x);
  const uint32_t nan = bits | 0x00400000;
  const uint32_t rounded = bits + 0x7fff + ((bits >> 16) & 1);
  return float_of(((bits & 0x7fffffff) > 0x7f800000 ? nan : rounded) & 0xffff0000);
}

// The 16-bit encoding in one format or the other (bf16 when `bf16`, else fp16), and back.
SYNC_WIRE_FN uint16_t encode16(float x, bool bf16) {
  return bf16 ? float_to_bf16(x) : float_to_half(x);
}
SYNC_WIRE_FN float decode16(uint16_t v, bool bf16) {
  return bf16 ? bf16_to_float(v) : half_to_float(v);
}

}  // namespace syncopate::wire_bits
