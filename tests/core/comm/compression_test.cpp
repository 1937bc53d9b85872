// Wire formats: the fp16 / bf16 converters on their edge cases, and collectives reduced in a
// 16-bit format (rounding points, kAvg before the cast, agreement of ranks, bytes).
#include "core/comm/compression.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/comm/collective_schedule.hpp"
#include "core/comm/schedule_cache.hpp"

namespace syncopate {
namespace {

float bits(uint32_t b) { return std::bit_cast<float>(b); }

TEST(Fp16, ExactValuesAndLimits) {
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);    // the largest half
  EXPECT_EQ(float_to_half(0x1p-14f), 0x0400);    // the smallest normal
  EXPECT_EQ(float_to_half(0x1p-24f), 0x0001);    // the smallest subnormal
  EXPECT_EQ(float_to_half(0x3ffp-24f), 0x03ff);  // the largest subnormal
  EXPECT_EQ(half_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(half_to_float(0x03ff), 0x3ffp-24f);
  EXPECT_EQ(half_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_to_float(0xfc00), -std::numeric_limits<float>::infinity());
}

TEST(Fp16, OverflowToInfinityAtTheHalfwayPoint) {
  EXPECT_EQ(float_to_half(65519.996f), 0x7bff);  // below 65520 rounds down to 65504
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);    // the tie goes to even: 65536 = inf
  EXPECT_EQ(float_to_half(1e10f), 0x7c00);
  EXPECT_EQ(float_to_half(-1e10f), 0xfc00);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity()), 0x7c00);
}

TEST(Fp16, TiesToEven) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: to even (1); 1 + 3 * 2^-11 to 1 + 2^-9.
  EXPECT_EQ(float_to_half(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(float_to_half(1.0f + 3 * 0x1p-11f), 0x3c02);
  // Just above the tie rounds up.
  EXPECT_EQ(float_to_half(std::nextafter(1.0f + 0x1p-11f, 2.0f)), 0x3c01);
  // Subnormal ties: 2^-25 (half the smallest subnormal) to 0, 3 * 2^-25 to 2 * 2^-24.
  EXPECT_EQ(float_to_half(0x1p-25f), 0x0000);
  EXPECT_EQ(float_to_half(3 * 0x1p-25f), 0x0002);
  EXPECT_EQ(float_to_half(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  // Rounding up out of the subnormals gives the smallest normal.
  EXPECT_EQ(float_to_half(0x7ffp-25f), 0x0400);
  // Far below: zero, sign kept; float subnormals too.
  EXPECT_EQ(float_to_half(-1e-30f), 0x8000);
  EXPECT_EQ(float_to_half(bits(0x00000001)), 0x0000);
}

TEST(Fp16, NanStaysNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(nan))));
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(-nan))));
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(bits(0x7f800001)))));  // signalling
  EXPECT_EQ(float_to_half(bits(0x7f800001)) & 0x7c00, 0x7c00);
  // A signalling half decodes quiet, its payload kept.
  EXPECT_EQ(std::bit_cast<uint32_t>(half_to_float(0x7c01)), 0x7fc02000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(half_to_float(0xfe01)), 0xffc02000u);
}

TEST(Fp16, EveryHalfRoundTripsAndMidpointsRoundToEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const float f = half_to_float(half);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), half) << std::hex << h;
    if ((h & 0x7fff) >= 0x7bff) continue;  // no finite neighbour above
    const float next = half_to_float(static_cast<uint16_t>(h + 1));
    const float mid = f + (next - f) / 2;  // exact in float
    const uint16_t even = (h & 1) == 0 ? half : static_cast<uint16_t>(h + 1);
    ASSERT_EQ(float_to_half(mid), even) << std::hex << h;
  }
}

TEST(Bf16, RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(bits(0x3f808000)), 0x3f80);  // tie, even below
  EXPECT_EQ(float_to_bf16(bits(0x3f818000)), 0x3f82);  // tie, even above
  EXPECT_EQ(float_to_bf16(bits(0x3f808001)), 0x3f81);
  EXPECT_EQ(float_to_bf16(bits(0x7f7fffff)), 0x7f80);  // the largest float rounds to inf
  EXPECT_EQ(float_to_bf16(bits(0x00018000)), 0x0002);  // subnormal tie to even
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(bf16_to_float(0x3f81), bits(0x3f810000));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(bits(0x7f800001)))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(round_to_wire(1.0f + 0x1p-9f, WireFormat::kBf16), 1.0f);
  EXPECT_EQ(round_to_wire(1.0f + 0x1p-9f, WireFormat::kFp32), 1.0f + 0x1p-9f);
}

TEST(Wire, EncodeDecodeIsExactForRepresentableValues) {
  std::vector<float> data = {0.5f, -3.25f, 1e-6f, 1234.5f};
  for (WireFormat wire : {WireFormat::kFp16, WireFormat::kBf16}) {
    std::vector<float> rounded = data;
    round_to_wire(rounded, wire);
    std::vector<uint16_t> encoded(data.size());
    std::vector<float> decoded(data.size());
    encode_wire(rounded, wire, encoded);
    decode_wire(encoded, wire, decoded);
    EXPECT_EQ(decoded, rounded) << to_string(wire);
  }
  EXPECT_EQ(element_bytes(WireFormat::kFp32), 4u);
  EXPECT_EQ(element_bytes(WireFormat::kFp16), 2u);
}

// Floats around every rounding point of both formats: each fp16 mantissa step (2^13 float
// ulps) and each bf16 one (2^16) with the bits below it zero, just under half, half, just over,
// and all ones, over every exponent and both signs (NaNs, infinities, subnormals, overflow edges
// included); an odd count, so that the vector loops' tails run too.
std::vector<float> around_rounding_points() {
  std::vector<float> out;
  for (uint32_t high = 0; high < (uint32_t{1} << 19); ++high)
    for (const uint32_t low : {0x0u, 0xfffu, 0x1000u, 0x1001u, 0x1fffu})
      out.push_back(bits(high << 13 | low));
  for (uint32_t high = 0; high < (uint32_t{1} << 16); ++high)
    for (const uint32_t low : {0x7fffu, 0x8000u, 0x8001u}) out.push_back(bits(high << 16 | low));
  out.push_back(1.0f);
  return out;
}

bool same_bits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

// The buffer loops (vectorised, compiled apart from the scalar converters) give the element-wise
// converters' bits on every input; a sum of two NaNs is NaN, whichever one the vector unit keeps.
void expect_buffer_loops_give_the_element_wise_bits(const std::vector<float>& data) {
  for (WireFormat wire : {WireFormat::kFp16, WireFormat::kBf16}) {
    const bool bf16 = wire == WireFormat::kBf16;
    std::vector<float> rounded = data;
    round_to_wire(rounded, wire);
    std::vector<uint16_t> encoded(data.size());
    encode_wire(data, wire, encoded);
    // dst + src: each point plus its neighbour in the list (sums land on rounding points too).
    std::vector<float> sums(data.begin() + 1, data.end()), addend(data.begin(), data.end() - 1);
    add_rounded(sums, addend, wire);
    // The same sums with the addend encoded (it decodes to the addend rounded).
    std::vector<float> sums_decoded(data.begin() + 1, data.end());
    add_decoded(sums_decoded, std::span(encoded).first(sums_decoded.size()), wire);
    size_t wrong = 0;
    for (size_t i = 0; i < data.size(); ++i) {
      wrong += !same_bits(rounded[i], round_to_wire(data[i], wire));
      wrong += encoded[i] != (bf16 ? float_to_bf16(data[i]) : float_to_half(data[i]));
      if (i + 1 < data.size()) {  // a sum of two NaNs is one of them: either may come out
        const float sum = round_to_wire(data[i + 1] + data[i], wire);
        wrong += std::isnan(sum) ? !std::isnan(sums[i]) : !same_bits(sums[i], sum);
        const float sum_decoded = round_to_wire(data[i + 1] + round_to_wire(data[i], wire), wire);
        wrong += std::isnan(sum_decoded) ? !std::isnan(sums_decoded[i])
                                         : !same_bits(sums_decoded[i], sum_decoded);
      }
    }
    EXPECT_EQ(wrong, 0u) << to_string(wire) << (wire_intrinsics() ? ", intrinsics" : "");
    wrong = 0;
    std::vector<uint16_t> every(65535);  // every pattern but 0xffff: an odd count
    for (size_t i = 0; i < every.size(); ++i) every[i] = static_cast<uint16_t>(i);
    std::vector<float> decoded(every.size());
    decode_wire(every, wire, decoded);
    for (size_t i = 0; i < every.size(); ++i)
      wrong += !same_bits(decoded[i], bf16 ? bf16_to_float(every[i]) : half_to_float(every[i]));
    EXPECT_EQ(wrong, 0u) << to_string(wire) << (wire_intrinsics() ? ", intrinsics" : "")
                         << ", decode";
  }
}

// Both on x86 intrinsics (AVX2 and F16C, where the CPU has them) and on the portable loops.
TEST(Wire, BufferLoopsGiveTheElementWiseBits) {
  const std::vector<float> data = around_rounding_points();
  ASSERT_EQ(data.size() % 2, 1u);
  const bool intrinsics = wire_intrinsics();
  allow_wire_intrinsics(false);
  EXPECT_FALSE(wire_intrinsics());
  for (const bool allowed : {true, false}) {
    allow_wire_intrinsics(allowed);
    EXPECT_EQ(wire_intrinsics(), allowed && intrinsics);
    expect_buffer_loops_give_the_element_wise_bits(data);
  }
}

// Every rank's buffer after prepare + schedule + finish, as every backend runs it.
std::vector<std::vector<float>> allreduce_all(Algorithm algorithm,
                                              std::vector<std::vector<float>> in, ReduceOp op,
                                              WireFormat wire, std::vector<int> nodes = {}) {
  const int p = static_cast<int>(in.size());
  const Schedule s = make_allreduce_schedule(algorithm, p, in[0].size(), nodes);
  std::vector<std::span<float>> spans;
  for (auto& b : in) {
    prepare(op, p, b, wire);
    spans.emplace_back(b);
  }
  execute_in_memory(s, spans, op, wire);
  for (auto& b : in) finish(op, p, b, wire);
  return in;
}

std::vector<std::vector<float>> random_buffers(int p, size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<std::vector<float>> out(static_cast<size_t>(p), std::vector<float>(n));
  for (auto& b : out)
    for (float& x : b) x = dist(gen);
  return out;
}

TEST(WireAllreduce, EveryAlgorithmAgreesAcrossRanksAndStaysNearTheFp32Mean) {
  for (WireFormat wire : {WireFormat::kFp16, WireFormat::kBf16}) {
    const double tolerance = wire == WireFormat::kFp16 ? 4e-3 : 6e-2;
    for (int p : {2, 3, 4, 5, 8}) {
      const auto in = random_buffers(p, 37, static_cast<uint32_t>(p));
      for (Algorithm a : {Algorithm::kRing, Algorithm::kRabenseifner, Algorithm::kRecursiveDoubling,
                          Algorithm::kBinomialTree, Algorithm::kMaster, Algorithm::kHierarchical}) {
        std::vector<int> nodes;
        if (a == Algorithm::kHierarchical)
          for (int r = 0; r < p; ++r) nodes.push_back(r % 2);
        const auto out = allreduce_all(a, in, ReduceOp::kAvg, wire, nodes);
        const auto exact = allreduce_all(a, in, ReduceOp::kAvg, WireFormat::kFp32, nodes);
        bool differs = false;
        for (size_t i = 0; i < in[0].size(); ++i) {
          for (int r = 1; r < p; ++r)
            ASSERT_EQ(std::bit_cast<uint32_t>(out[static_cast<size_t>(r)][i]),
                      std::bit_cast<uint32_t>(out[0][i]))
                << to_string(wire) << " " << to_string(a) << " p=" << p << " i=" << i;
          EXPECT_EQ(round_to_wire(out[0][i], wire), out[0][i]);  // representable
          EXPECT_NEAR(out[0][i], exact[0][i], tolerance * (1 + std::fabs(exact[0][i])));
          differs = differs || out[0][i] != exact[0][i];
        }
        EXPECT_TRUE(differs) << "values not rounded: " << to_string(wire) << " " << to_string(a);
      }
    }
  }
}

TEST(WireAllreduce, TwoRanksRoundTheInputsAndTheSum) {
  // fp16 sum of two ranks: each input rounded, the sum rounded once more.
  const float a = 1.0f + 0x1p-12f, b = 1.0f + 0x1p-10f;  // a rounds to 1, b is exact
  const auto out = allreduce_all(Algorithm::kRing, {{a}, {b}}, ReduceOp::kSum, WireFormat::kFp16);
  // 1 + (1 + 2^-10) = 2 + 2^-10: halfway between 2 and 2 + 2^-9, to even: 2.
  EXPECT_EQ(out[0][0], 2.0f);
  EXPECT_EQ(out[1][0], 2.0f);
}

TEST(WireAllreduce, AvgDividesBeforeTheCastSoTheSumDoesNotOverflow) {
  const std::vector<std::vector<float>> in(4, std::vector<float>{40000.0f});
  const auto avg = allreduce_all(Algorithm::kRing, in, ReduceOp::kAvg, WireFormat::kFp16);
  EXPECT_EQ(avg[0][0], 40000.0f);
  const auto sum = allreduce_all(Algorithm::kRing, in, ReduceOp::kSum, WireFormat::kFp16);
  EXPECT_TRUE(std::isinf(sum[0][0]));  // the fp16 sum overflows, as NCCL's would
}

TEST(WireAllreduce, OneRankRoundsNothing) {
  const float x = 1.0f + 0x1p-20f;
  const auto out = allreduce_all(Algorithm::kRing, {{x}}, ReduceOp::kAvg, WireFormat::kFp16);
  EXPECT_EQ(out[0][0], x);
}

TEST(WireAllreduce, TrafficIsTwoBytesPerElement) {
  ScheduleCache cache({0, 0, 0, 0}, CacheScope::kAllRanks);
  const size_t n = 1 << 20;
  const CachedSchedule& fp32 =
      cache.entry(cache.key(CollectiveKind::kAllreduce, Algorithm::kRing, n, 0));
  const CachedSchedule& fp16 =
      cache.entry(cache.key(CollectiveKind::kAllreduce, Algorithm::kRing, n, 0, WireFormat::kFp16));
  for (size_t r = 0; r < 4; ++r) {
    EXPECT_EQ(fp32.traffic[r].bytes_sent, 2 * 3 * n);  // ring: 2 (p-1)/p n elements of 4 bytes
    EXPECT_EQ(2 * fp16.traffic[r].bytes_sent, fp32.traffic[r].bytes_sent);
    EXPECT_EQ(2 * fp16.traffic[r].bytes_recv, fp32.traffic[r].bytes_recv);
  }
  const Schedule s = make_allreduce_schedule(Algorithm::kRing, 4, n);
  EXPECT_EQ(2 * bytes_sent(s, 1, WireFormat::kBf16), bytes_sent(s, 1));
}

}  // namespace
}  // namespace syncopate
