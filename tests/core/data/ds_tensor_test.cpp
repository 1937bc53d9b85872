// The ds-tensor: coverage of every sample per epoch, deal order, rechunk, shuffle, apply and
// collect.
#include "core/data/ds_tensor.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <vector>

#include "core/base/check.hpp"

namespace syncopate {
namespace {

// n samples whose features tell where they came from: x[i] = (i, -i), y[i] = i % 10.
Dataset tagged(int64_t n) {
  Dataset d;
  d.name = "tagged";
  d.num_classes = 10;
  d.x = Tensor({n, 2});
  d.y = Tensor({n});
  for (int64_t i = 0; i < n; ++i) {
    d.x[2 * i] = static_cast<float>(i);
    d.x[2 * i + 1] = -static_cast<float>(i);
    d.y[i] = static_cast<float>(i % 10);
  }
  return d;
}

// True when every index of 0..n-1 appears exactly once.
bool covers_once(std::vector<int64_t> samples, int64_t n) {
  std::sort(samples.begin(), samples.end());
  std::vector<int64_t> all(static_cast<size_t>(n));
  std::iota(all.begin(), all.end(), int64_t{0});
  return samples == all;
}

std::vector<int64_t> all_workers(const DsTensor& t, uint64_t seed, uint32_t epoch, int workers,
                                 bool shuffle) {
  std::vector<int64_t> all;
  for (int w = 0; w < workers; ++w) {
    const auto mine = t.samples_of_worker(seed, epoch, w, workers, shuffle);
    all.insert(all.end(), mine.begin(), mine.end());
  }
  return all;
}

TEST(DsTensor, BlocksKeepTheRemainder) {
  // 60,000 = 7 * 8571 + 3: three blocks of 8572, four of 8571.
  const DsTensor t = DsTensor::from_dataset(tagged(60000), 7);
  EXPECT_EQ(t.num_samples(), 60000);
  EXPECT_EQ(t.num_row_blocks(), 7);
  int64_t next = 0;
  for (int64_t b = 0; b < 7; ++b) {
    const IndexRange r = t.row_range(b);
    EXPECT_EQ(r.begin, next);
    EXPECT_EQ(r.size(), b < 3 ? 8572 : 8571) << b;
    next = r.end;
  }
  EXPECT_EQ(next, 60000);
}

TEST(DsTensor, EverySampleOncePerEpochAcrossWorkers) {
  const DsTensor t = DsTensor::from_dataset(tagged(60000), 7);
  for (uint32_t epoch = 0; epoch < 4; ++epoch) {
    for (bool shuffle : {false, true}) {
      EXPECT_TRUE(covers_once(all_workers(t, 5, epoch, 3, shuffle), 60000)) << epoch;
    }
  }
  // Worker counts that divide, do not divide, and exceed the block count.
  for (int workers : {1, 2, 5, 7, 8}) {
    EXPECT_TRUE(covers_once(all_workers(t, 5, 1, workers, true), 60000)) << workers;
  }
}

TEST(DsTensor, OrderIsAPureFunctionOfSeedAndEpoch) {
  const DsTensor t = DsTensor::from_dataset(tagged(60000), 7);
  const DsTensor u = DsTensor::from_dataset(tagged(60000), 7);  // an independent "worker"
  EXPECT_EQ(t.samples_of_worker(5, 2, 1, 3, true), u.samples_of_worker(5, 2, 1, 3, true));
  EXPECT_EQ(t.samples_of_worker(5, 2, 1, 3, true), t.samples_of_worker(5, 2, 1, 3, true));
  EXPECT_NE(t.samples_of_worker(5, 2, 1, 3, true), t.samples_of_worker(5, 3, 1, 3, true));
  EXPECT_NE(t.samples_of_worker(5, 2, 1, 3, true), t.samples_of_worker(6, 2, 1, 3, true));
  // Round-robin from the permuted order.
  const auto perm = t.block_permutation(5, 2);
  EXPECT_TRUE(covers_once(perm, 7));
  EXPECT_EQ(t.blocks_of_worker(5, 2, 0, 3), (std::vector<int64_t>{perm[0], perm[3], perm[6]}));
  EXPECT_EQ(t.blocks_of_worker(5, 2, 2, 3), (std::vector<int64_t>{perm[2], perm[5]}));
  EXPECT_TRUE(t.blocks_of_worker(5, 2, 7, 8).empty());
  // The in-block order is the block's own: the same whichever worker (and W) trains it.
  const auto whole = t.samples_of_worker(5, 2, 0, 1, true);
  std::vector<int64_t> expected;
  for (int64_t b : perm) {
    const auto part = t.samples_of_block(b, 5, 2, true);
    const IndexRange r = t.row_range(b);
    EXPECT_NE(part, t.samples_of_block(b, 5, 2, false));
    auto sorted = part;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, t.samples_of_block(b, 5, 2, false));  // same samples, in order
    EXPECT_EQ(*std::min_element(part.begin(), part.end()), r.begin);
    EXPECT_EQ(*std::max_element(part.begin(), part.end()), r.end - 1);
    expected.insert(expected.end(), part.begin(), part.end());
  }
  EXPECT_EQ(whole, expected);
}

TEST(DsTensor, RechunkGlobalShuffleCollect) {
  auto data = std::make_shared<const Dataset>(tagged(1000));
  const DsTensor t = DsTensor::from_dataset(data, 4);
  EXPECT_EQ(&t.dataset(), data.get());  // shared, not copied
  const DsTensor r = t.rechunk(9);
  EXPECT_EQ(r.num_row_blocks(), 9);
  EXPECT_EQ(&r.dataset(), data.get());
  EXPECT_TRUE(covers_once(all_workers(r, 1, 0, 4, true), 1000));
  const Dataset c = r.collect();
  EXPECT_TRUE(std::equal(c.x.span().begin(), c.x.span().end(), data->x.span().begin()));

  const DsTensor s = t.global_shuffle(3);
  EXPECT_EQ(&s.dataset(), data.get());
  EXPECT_EQ(s.num_row_blocks(), 4);
  const Dataset sc = s.collect();
  ASSERT_EQ(sc.x.shape(), (Shape{1000, 2}));
  std::vector<int64_t> order(1000);
  for (int64_t i = 0; i < 1000; ++i) {
    order[static_cast<size_t>(i)] = static_cast<int64_t>(sc.x[2 * i]);
    EXPECT_EQ(sc.x[2 * i + 1], -sc.x[2 * i]);                                    // rows move whole
    EXPECT_EQ(sc.y[i], static_cast<float>(order[static_cast<size_t>(i)] % 10));  // with labels
    EXPECT_EQ(s.sample_at(i), order[static_cast<size_t>(i)]);
  }
  EXPECT_TRUE(covers_once(order, 1000));
  std::vector<int64_t> identity(1000);
  std::iota(identity.begin(), identity.end(), int64_t{0});
  EXPECT_NE(order, identity);
  // Block 0 of the shuffled tensor holds its first 250 positions.
  EXPECT_EQ(s.samples_of_block(0, 0, 0, false),
            std::vector<int64_t>(order.begin(), order.begin() + 250));
  // Seeded: same seed, same order; shuffling a rechunked shuffle keeps covering.
  EXPECT_EQ(t.global_shuffle(3).collect().x.span()[10], sc.x[10]);
  EXPECT_TRUE(covers_once(all_workers(s.rechunk(7).global_shuffle(4), 2, 1, 3, true), 1000));
}

TEST(DsTensor, ApplyPerBlockIsCopyOnWrite) {
  auto data = std::make_shared<const Dataset>(tagged(10));
  DsTensor t = DsTensor::from_dataset(data, 3);  // blocks of 4, 3, 3
  const DsTensor before = t;
  std::vector<Shape> shapes;
  t.apply([&](int64_t block, Tensor& view) {
    shapes.push_back(view.shape());
    for (float& v : view.span()) v += 1000.0f * static_cast<float>(block);
  });
  EXPECT_EQ(shapes, (std::vector<Shape>{{4, 2}, {3, 2}, {3, 2}}));
  const Dataset c = t.collect();
  for (int64_t i = 0; i < 10; ++i) {
    const float block = i < 4 ? 0 : (i < 7 ? 1 : 2);
    EXPECT_EQ(c.x[2 * i], static_cast<float>(i) + 1000 * block) << i;
  }
  // The shared dataset and the earlier handle are untouched.
  EXPECT_EQ(data->x[2 * 9], 9.0f);
  EXPECT_EQ(before.collect().x[2 * 9], 9.0f);

  // A shuffled tensor applies over its own (shuffled) blocks.
  DsTensor s = DsTensor::from_dataset(tagged(10), 2).global_shuffle(8);
  const Dataset sc = s.collect();
  s.apply([](int64_t block, Tensor& view) { view.fill(static_cast<float>(block)); });
  const Dataset after = s.collect();
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(after.x[2 * i], i < 5 ? 0.0f : 1.0f);
  EXPECT_TRUE(std::equal(after.y.span().begin(), after.y.span().end(), sc.y.span().begin()));
}

TEST(DsTensor, ColumnBlocks) {
  Dataset d;
  d.name = "grid";
  d.x = Tensor({4, 5});
  d.y = Tensor({4});
  for (int64_t i = 0; i < 20; ++i) d.x[i] = static_cast<float>(i);
  DsTensor t = DsTensor::from_dataset(std::move(d), 2, 2);  // 2 x 2 grid, columns 3 + 2
  EXPECT_EQ(t.col_range(0).size(), 3);
  EXPECT_EQ(t.col_range(1).begin, 3);
  std::vector<int64_t> seen;
  t.apply([&](int64_t block, Tensor& view) {
    seen.push_back(block);
    EXPECT_EQ(view.shape(), (Shape{2, block % 2 == 0 ? 3 : 2}));
    for (float& v : view.span()) v = v * 10 + static_cast<float>(block);
  });
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 1, 2, 3}));
  const Dataset c = t.collect();
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 5; ++j) {
      const int64_t block = (i / 2) * 2 + (j < 3 ? 0 : 1);
      EXPECT_EQ(c.x[i * 5 + j], static_cast<float>((i * 5 + j) * 10 + block));
    }
  }
}

TEST(DsTensor, BadGrids) {
  EXPECT_THROW(DsTensor::from_dataset(tagged(10), 0), UserError);
  EXPECT_THROW(DsTensor::from_dataset(tagged(10), 11), UserError);
  EXPECT_THROW(DsTensor::from_dataset(tagged(10), 2, 3), UserError);  // 2 features
  EXPECT_NO_THROW(DsTensor::from_dataset(tagged(10), 10, 2));
}

}  // namespace
}  // namespace syncopate
