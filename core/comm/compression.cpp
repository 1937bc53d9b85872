// Rounding of values and buffers to a wire format, and their 16-bit encodings.
#include "core/comm/compression.hpp"

#include "core/base/check.hpp"

namespace syncopate {

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
