// The data partitions: every sample held by exactly one worker, determinism from the seed, the
// Dirichlet draw, alpha's label skew and the shards' few classes per worker.
#include "core/data/partition.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace syncopate {
namespace {

// n labels of `classes` classes, sample i of class i % classes.
std::vector<int> round_robin_labels(int64_t n, int classes) {
  std::vector<int> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) labels[static_cast<size_t>(i)] = static_cast<int>(i % classes);
  return labels;
}

// True when the workers' lists together hold 0..n-1 exactly once.
bool covers_once(const Partition& p, int64_t n) {
  std::vector<int64_t> all;
  for (const auto& samples : p.samples) all.insert(all.end(), samples.begin(), samples.end());
  std::sort(all.begin(), all.end());
  std::vector<int64_t> expected(static_cast<size_t>(n));
  std::iota(expected.begin(), expected.end(), int64_t{0});
  return all == expected;
}

// The mean over workers (with samples) of their class histogram's entropy, in nats.
double mean_class_entropy(const Partition& p, const std::vector<int>& labels, int classes) {
  double total = 0;
  int counted = 0;
  for (const auto& counts : class_histogram(p, labels, classes)) {
    const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), int64_t{0}));
    if (n == 0) continue;
    double h = 0;
    for (int64_t c : counts)
      if (c > 0) h -= static_cast<double>(c) / n * std::log(static_cast<double>(c) / n);
    total += h;
    ++counted;
  }
  return counted == 0 ? 0 : total / counted;
}

TEST(Partition, FixedSharesCoverEverySampleOnceAndDifferByAtMostOne) {
  const Partition p = fixed_partition(1003, 4, 7);
  ASSERT_EQ(p.workers(), 4);
  EXPECT_TRUE(covers_once(p, 1003));
  for (const auto& samples : p.samples) {
    EXPECT_GE(samples.size(), 250u);
    EXPECT_LE(samples.size(), 251u);
    EXPECT_TRUE(std::is_sorted(samples.begin(), samples.end()));
  }
  EXPECT_EQ(fixed_partition(1003, 4, 7).samples, p.samples);
  EXPECT_NE(fixed_partition(1003, 4, 8).samples, p.samples);
}

TEST(Partition, DirichletCoversEverySampleOnceAndDependsOnlyOnTheSeed) {
  const std::vector<int> labels = round_robin_labels(2000, 10);
  const Partition p = dirichlet_partition(labels, 10, 5, 0.5, 3);
  EXPECT_TRUE(covers_once(p, 2000));
  EXPECT_EQ(dirichlet_partition(labels, 10, 5, 0.5, 3).samples, p.samples);
  EXPECT_NE(dirichlet_partition(labels, 10, 5, 0.5, 4).samples, p.samples);
}

TEST(Partition, DirichletDrawSumsToOneAndTinyAlphaPutsTheMassOnOnePart) {
  Rng rng({1, 0, 0, RngPurpose::kPartition, 99});
  for (double alpha : {0.05, 0.5, 1.0, 20.0}) {
    const std::vector<double> p = dirichlet_draw(rng, 6, alpha);
    EXPECT_NEAR(std::accumulate(p.begin(), p.end(), 0.0), 1.0, 1e-12) << alpha;
    for (double x : p) EXPECT_GE(x, 0.0);
  }
  // Gamma(1e-6) draws underflow to zero: the limit, all of the mass on one part.
  const std::vector<double> tiny = dirichlet_draw(rng, 6, 1e-6);
  EXPECT_EQ(std::count(tiny.begin(), tiny.end(), 1.0), 1);
  // The mean of Dir(2, 2, 2, 2) is 1/4 per part.
  double first = 0;
  for (int i = 0; i < 4000; ++i) first += dirichlet_draw(rng, 4, 2.0)[0];
  EXPECT_NEAR(first / 4000, 0.25, 0.01);
}

// Small alpha: each worker sees few classes (low entropy); large alpha: nearly every class in
// proportion (entropy near log 10).
TEST(Partition, DirichletSkewFollowsAlpha) {
  const std::vector<int> labels = round_robin_labels(10000, 10);
  double skewed = 0, even = 0;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    skewed += mean_class_entropy(dirichlet_partition(labels, 10, 10, 0.1, seed), labels, 10) / 3;
    even += mean_class_entropy(dirichlet_partition(labels, 10, 10, 100.0, seed), labels, 10) / 3;
  }
  EXPECT_GT(even, 0.97 * std::log(10.0));
  EXPECT_LT(skewed, 0.5 * std::log(10.0));
  EXPECT_LT(skewed, 0.5 * even);
}

TEST(Partition, ShardsCoverEverySampleOnceWithAtMostKClassesPerWorker) {
  const std::vector<int> labels = round_robin_labels(1000, 10);  // 100 of each class
  const Partition p = shards_partition(labels, 5, 2, 11);        // 10 shards of 100: one class each
  EXPECT_TRUE(covers_once(p, 1000));
  for (const auto& counts : class_histogram(p, labels, 10)) {
    EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), int64_t{0}), 200);
    EXPECT_EQ(std::count(counts.begin(), counts.end(), int64_t{100}), 2);
  }
  EXPECT_EQ(shards_partition(labels, 5, 2, 11).samples, p.samples);
  EXPECT_NE(shards_partition(labels, 5, 2, 12).samples, p.samples);
  // Uneven shards (1000 samples in 7 x 3 shards) still cover every sample once.
  EXPECT_TRUE(covers_once(shards_partition(labels, 7, 3, 11), 1000));
}

TEST(Partition, EpochOrderIsTheWorkersSamplesReshuffledPerEpoch) {
  const Partition p = fixed_partition(500, 3, 5);
  const std::vector<int64_t> e0 = worker_epoch_order(p, 1, 5, 0, true);
  const std::vector<int64_t> e1 = worker_epoch_order(p, 1, 5, 1, true);
  EXPECT_NE(e0, e1);
  EXPECT_EQ(worker_epoch_order(p, 1, 5, 0, true), e0);
  EXPECT_EQ(worker_epoch_order(p, 1, 5, 0, false), p.samples[1]);
  std::vector<int64_t> sorted = e1;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, p.samples[1]);
}

TEST(Partition, CsvHasOneRowPerWorkerAndClass) {
  const std::vector<int> labels = {0, 1, 1, 2, 2, 2};
  Partition p;
  p.samples = {{0, 3}, {1, 2, 4, 5}};
  EXPECT_EQ(partitions_csv(class_histogram(p, labels, 3)),
            "worker,class,count\n0,0,1\n0,1,0\n0,2,1\n1,0,0\n1,1,2\n1,2,2\n");
}

}  // namespace
}  // namespace syncopate
