#pragma once
// Compressed collectives: the wire formats a collective may send (fp32, fp16, bf16), exact
// round-to-nearest-even converters between them, and the reduction arithmetic in a wire format.
//
// Semantics (the same on every backend, because the shared schedule code applies them): a
// collective in a 16-bit wire format reduces in that format, as NCCL does for ncclHalf /
// ncclBfloat16 buffers and as PyTorch's fp16_compress_hook / bf16_compress_hook do
// (cast, allreduce in half precision, cast back):
//   1. before the schedule, kAvg divides by p in fp32 (PyTorch divides before the allreduce: no
//      overflow of the sum), then every element is rounded to the wire format;
//   2. every partial sum is computed in fp32 and rounded to the wire format (the correctly
//      rounded half-precision sum: fp32 has at least 2p+2 bits of either format, so the double
//      rounding is innocuous); every value a rank holds is thus representable, and the encoding
//      of a send is exact;
//   3. no division after the schedule; the result stays in float storage, in wire precision.
// Every rank therefore ends with the same bits under every algorithm. A collective over one rank
// sends nothing and rounds nothing (one worker equals serial training).
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "core/base/enum_names.hpp"
#include "core/comm/wire_bits.hpp"

namespace syncopate {

enum class WireFormat { kFp32, kFp16, kBf16 };
inline constexpr NameTable<WireFormat, 3> kWireFormatNames{
    {{WireFormat::kFp32, "fp32"}, {WireFormat::kFp16, "fp16"}, {WireFormat::kBf16, "bf16"}}};
inline std::string_view to_string(WireFormat wire) { return name_in(kWireFormatNames, wire); }

// Bytes one element takes on the wire: 4, 2 or 2.
constexpr size_t element_bytes(WireFormat wire) { return wire == WireFormat::kFp32 ? 4 : 2; }

// The converters, round to nearest even (core/comm/wire_bits.hpp, shared with the device):
// binary16 overflows to infinity (|x| >= 65520) and has subnormals below 2^-14; NaN stays NaN.
using wire_bits::bf16_to_float;
using wire_bits::float_to_bf16;
using wire_bits::float_to_half;
using wire_bits::half_to_float;

// x rounded to the wire format (x itself for kFp32).
float round_to_wire(float x, WireFormat wire);
void round_to_wire(std::span<float> data, WireFormat wire);
// dst[i] = round_to_wire(dst[i] + src[i], wire): a reduction step in the wire format.
void add_rounded(std::span<float> dst, std::span<const float> src, WireFormat wire);

// Whether the buffer functions (round_to_wire, add_rounded, encode_wire, decode_wire,
// add_decoded) run on x86 intrinsics (AVX2 and F16C; fp16 on the CPU's own conversions), which
// give the bits of the element-wise converters; allow_wire_intrinsics(false) makes them use the
// portable loops (tests compare the two).
bool wire_intrinsics();
void allow_wire_intrinsics(bool allowed);

// 16-bit formats only: data encoded element by element / decoded back (sizes must match).
void encode_wire(std::span<const float> data, WireFormat wire, std::span<uint16_t> out);
void decode_wire(std::span<const uint16_t> data, WireFormat wire, std::span<float> out);
// dst[i] = round_to_wire(dst[i] + src[i] decoded, wire): add_rounded of an encoded addend in one
// pass, without decoding it into a buffer first (same bits).
void add_decoded(std::span<float> dst, std::span<const uint16_t> src, WireFormat wire);

}  // namespace syncopate
