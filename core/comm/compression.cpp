// fp16 and bf16 round-to-nearest-even converters, and rounding of buffers to a wire format.
#include "core/comm/compression.hpp"

#include <bit>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

// Rounds `value >> shift` to nearest, ties to even (shift in 1..31).
uint32_t shift_round_even(uint32_t value, uint32_t shift) {
  const uint32_t kept = value >> shift;
  const uint32_t rest = value & ((uint32_t{1} << shift) - 1);
  const uint32_t half = uint32_t{1} << (shift - 1);
  return kept + ((rest > half || (rest == half && (kept & 1) != 0)) ? 1 : 0);
}

}  // namespace

uint16_t float_to_half(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t magnitude = bits & 0x7fffffff;
  if (magnitude > 0x7f800000)  // NaN: quiet, the payload's top bits kept
    return static_cast<uint16_t>(sign | 0x7e00 | ((magnitude >> 13) & 0x3ff));
  if (magnitude >= 0x477ff000) return static_cast<uint16_t>(sign | 0x7c00);  // >= 65520: inf
  const uint32_t exponent = magnitude >> 23;
  if (exponent < 113) {               // below 2^-14: a half subnormal (or zero) m * 2^-24
    if (exponent < 101) return sign;  // below 2^-26: rounds to zero
    const uint32_t mantissa = (magnitude & 0x7fffff) | 0x800000;
    // value = mantissa * 2^(exponent - 150); m = value * 2^24 = mantissa >> (126 - exponent).
    return static_cast<uint16_t>(sign | shift_round_even(mantissa, 126 - exponent));
  }
  // Normal: rebias the exponent (127 -> 15), round the 23-bit mantissa to 10 bits; a carry
  // moves into the exponent, which is the right result.
  const uint32_t rebiased = magnitude - (uint32_t{112} << 23);
  return static_cast<uint16_t>(sign | shift_round_even(rebiased, 13));
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000 | (mantissa << 13));
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in float
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t float_to_bf16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x0040);
  // A carry out of the mantissa moves into the exponent (to infinity past the largest float).
  return static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

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
  if (wire == WireFormat::kFp32) return;
  for (float& x : data) x = round_to_wire(x, wire);
}

void encode_wire(std::span<const float> data, WireFormat wire, std::span<uint16_t> out) {
  SYNC_CHECK(wire != WireFormat::kFp32 && data.size() == out.size(),
             "wire " << static_cast<int>(wire) << " data " << data.size() << " out " << out.size());
  if (wire == WireFormat::kFp16)
    for (size_t i = 0; i < data.size(); ++i) out[i] = float_to_half(data[i]);
  else
    for (size_t i = 0; i < data.size(); ++i) out[i] = float_to_bf16(data[i]);
}

void decode_wire(std::span<const uint16_t> data, WireFormat wire, std::span<float> out) {
  SYNC_CHECK(wire != WireFormat::kFp32 && data.size() == out.size(),
             "wire " << static_cast<int>(wire) << " data " << data.size() << " out " << out.size());
  if (wire == WireFormat::kFp16)
    for (size_t i = 0; i < data.size(); ++i) out[i] = half_to_float(data[i]);
  else
    for (size_t i = 0; i < data.size(); ++i) out[i] = bf16_to_float(data[i]);
}

}  // namespace syncopate
