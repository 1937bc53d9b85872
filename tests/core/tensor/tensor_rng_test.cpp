// Tensors, the counter-based RNG (Philox known answer, keyed streams, moments, shuffles),
// block ranges and name tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "core/base/check.hpp"
#include "core/comm/comm.hpp"
#include "core/base/rng.hpp"
#include "core/tensor/tensor.hpp"

namespace syncopate {
namespace {

TEST(Tensor, OwningViewAndShapeOnly) {
  Tensor a({2, 3});
  EXPECT_EQ(a.numel(), 6);
  EXPECT_FALSE(a.shape_only());
  a[4] = 7.0f;
  Tensor b = a;  // deep copy
  b[4] = 1.0f;
  EXPECT_EQ(a[4], 7.0f);
  Tensor v = Tensor::view({6}, a.data());
  v[0] = 3.0f;
  EXPECT_EQ(a[0], 3.0f);
  Tensor s = Tensor::shape_only({1024, 1024, 64});
  EXPECT_TRUE(s.shape_only());
  EXPECT_EQ(s.data(), nullptr);
  EXPECT_EQ(s.numel(), 1024 * 1024 * 64);
  EXPECT_THROW(v.resize({7}), InternalError);
  EXPECT_THROW(a.reshape({4}), InternalError);
}

TEST(Philox, KnownAnswer) {
  // Random123's published known-answer vector for philox4x32-10 with all-ones inputs.
  const auto out = philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                              {0xffffffffu, 0xffffffffu});
  EXPECT_EQ(out[0], 0x408f276du);
  EXPECT_EQ(out[1], 0x41c83b0eu);
  EXPECT_EQ(out[2], 0xa20bc7c6u);
  EXPECT_EQ(out[3], 0x6d5451fdu);
}

TEST(Rng, SameKeySameStreamDifferentKeyDifferentStream) {
  Rng a({42, 1, 3, RngPurpose::kDropout, 0}), b({42, 1, 3, RngPurpose::kDropout, 0});
  Rng c({42, 1, 4, RngPurpose::kDropout, 0});
  int differ = 0;
  for (int i = 0; i < 1000; ++i) {
    const uint32_t x = a.next_u32();
    EXPECT_EQ(x, b.next_u32());
    differ += x != c.next_u32();
  }
  EXPECT_GT(differ, 990);
}

TEST(Rng, UniformAndNormalMoments) {
  Rng r({7});
  double sum = 0, sum_sq = 0, nsum = 0, nsum_sq = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    sum_sq += u * u;
    const double z = r.normal();
    nsum += z;
    nsum_sq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.005);
  EXPECT_NEAR(sum_sq / n - 0.25, 1.0 / 12.0, 0.005);
  EXPECT_NEAR(nsum / n, 0.0, 0.01);
  EXPECT_NEAR(nsum_sq / n, 1.0, 0.02);
}

TEST(Rng, ShuffleIsAPermutation) {
  std::vector<int> v(1000);
  std::iota(v.begin(), v.end(), 0);
  Rng r({3});
  r.shuffle(v.data(), v.size());
  EXPECT_FALSE(std::is_sorted(v.begin(), v.end()));
  std::sort(v.begin(), v.end());
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(v[static_cast<size_t>(i)], i);
}

TEST(BlockOf, CoversBufferForAwkwardSizes) {
  for (size_t n : {0u, 1u, 5u, 17u, 1000u}) {
    for (int p = 1; p <= 17; ++p) {
      size_t next = 0;
      for (int i = 0; i < p; ++i) {
        const BlockRange b = block_of(n, p, i);
        EXPECT_EQ(b.offset, next);
        next += b.count;
      }
      EXPECT_EQ(next, n);
    }
  }
}

TEST(Names, RoundTrip) {
  for (auto a : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kRabenseifner,
                 Algorithm::kRecursiveDoubling, Algorithm::kBinomialTree, Algorithm::kHierarchical})
    EXPECT_EQ(parse_algorithm(to_string(a)), a);
  EXPECT_FALSE(parse_algorithm("butterfly").has_value());
  EXPECT_EQ(parse_reduce_op("avg"), ReduceOp::kAvg);
}

}  // namespace
}  // namespace syncopate
