// Philox4x32-10 and the keyed streams built on it.
#include "core/base/rng.hpp"

#include <cmath>

namespace syncopate {

std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> c, std::array<uint32_t, 2> k) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t{kM0} * c[0];
    const uint64_t p1 = uint64_t{kM1} * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

Rng::Rng(const RngKey& key) {
  key_ = {static_cast<uint32_t>(key.seed), static_cast<uint32_t>(key.seed >> 32)};
  // The counter's upper words carry the rest of the key; the low word counts blocks.
  counter_ = {0, key.worker, key.epoch, (static_cast<uint32_t>(key.purpose) << 24) ^ key.extra};
}

void Rng::refill() {
  buffer_ = philox4x32(counter_, key_);
  ++counter_[0];
  used_ = 0;
}

uint32_t Rng::next_u32() {
  if (used_ == 4) refill();
  return buffer_[static_cast<size_t>(used_++)];
}

uint64_t Rng::next_u64() {
  const uint64_t hi = next_u32();
  return (hi << 32) | next_u32();
}

float Rng::uniform() { return static_cast<float>(next_u32() >> 8) * 0x1.0p-24f; }

double Rng::uniform_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

float Rng::uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }

float Rng::normal() {
  // 1 - u keeps the log argument in (0, 1].
  const double u1 = 1.0 - uniform_double();
  const double u2 = uniform_double();
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
}

uint64_t Rng::below(uint64_t bound) {
  if (bound <= 1) return 0;
  // Lemire-free simple rejection: discard the top partial range.
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x;
  do {
    x = next_u64();
  } while (x >= limit);
  return x % bound;
}

}  // namespace syncopate
