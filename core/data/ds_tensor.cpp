// The ds-tensor: blocks, their per-epoch deal to workers, rechunk, shuffle, apply and collect.
#include "core/data/ds_tensor.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>

#include "core/base/check.hpp"
#include "core/base/rng.hpp"

namespace syncopate {

IndexRange even_part(int64_t n, int64_t parts, int64_t i) {
  const int64_t base = n / parts, extra = n % parts;
  const int64_t begin = i * base + std::min(i, extra);
  return {begin, begin + base + (i < extra ? 1 : 0)};
}

namespace {

void check_grid(const Dataset& data, int64_t row_blocks, int64_t col_blocks) {
  if (row_blocks < 1 || row_blocks > data.size()) {
    throw UserError("data.blocks: " + std::to_string(row_blocks) + " row blocks for " +
                    std::to_string(data.size()) + " samples of " + data.name + "; allowed: 1.." +
                    std::to_string(data.size()));
  }
  if (col_blocks < 1 || col_blocks > data.sample_numel()) {
    throw UserError("data.col_blocks: " + std::to_string(col_blocks) + " column blocks for " +
                    std::to_string(data.sample_numel()) + " features; allowed: 1.." +
                    std::to_string(data.sample_numel()));
  }
}

}  // namespace

DsTensor::DsTensor(std::shared_ptr<const Dataset> data,
                   std::shared_ptr<const std::vector<int64_t>> order, int64_t row_blocks,
                   int64_t col_blocks, bool owned)
    : data_(std::move(data)),
      order_(std::move(order)),
      row_blocks_(row_blocks),
      col_blocks_(col_blocks),
      owned_(owned) {
  SYNC_CHECK(data_ != nullptr, "null dataset");
  check_grid(*data_, row_blocks_, col_blocks_);
  SYNC_CHECK(!order_ || static_cast<int64_t>(order_->size()) == data_->size(),
             "order of " << order_->size() << " for " << data_->size() << " samples");
}

DsTensor DsTensor::from_dataset(std::shared_ptr<const Dataset> data, int64_t row_blocks,
                                int64_t col_blocks) {
  return DsTensor(std::move(data), nullptr, row_blocks, col_blocks, false);
}

DsTensor DsTensor::from_dataset(Dataset data, int64_t row_blocks, int64_t col_blocks) {
  return DsTensor(std::make_shared<Dataset>(std::move(data)), nullptr, row_blocks, col_blocks,
                  true);
}

IndexRange DsTensor::row_range(int64_t block) const {
  SYNC_CHECK(block >= 0 && block < row_blocks_, "row block " << block << " of " << row_blocks_);
  return even_part(num_samples(), row_blocks_, block);
}

IndexRange DsTensor::col_range(int64_t block) const {
  SYNC_CHECK(block >= 0 && block < col_blocks_, "column block " << block << " of " << col_blocks_);
  return even_part(data_->sample_numel(), col_blocks_, block);
}

std::vector<int64_t> DsTensor::block_permutation(uint64_t seed, uint32_t epoch) const {
  std::vector<int64_t> perm(static_cast<size_t>(row_blocks_));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  Rng rng({seed, 0, epoch, RngPurpose::kBlockPermutation, 0});
  rng.shuffle(perm.data(), perm.size());
  return perm;
}

std::vector<int64_t> DsTensor::blocks_of_worker(uint64_t seed, uint32_t epoch, int worker,
                                                int workers) const {
  SYNC_CHECK(workers >= 1 && worker >= 0 && worker < workers,
             "worker " << worker << " of " << workers);
  const std::vector<int64_t> perm = block_permutation(seed, epoch);
  std::vector<int64_t> mine;
  for (size_t i = static_cast<size_t>(worker); i < perm.size(); i += static_cast<size_t>(workers)) {
    mine.push_back(perm[i]);
  }
  return mine;
}

std::vector<int64_t> DsTensor::samples_of_block(int64_t block, uint64_t seed, uint32_t epoch,
                                                bool shuffle) const {
  const IndexRange range = row_range(block);
  std::vector<int64_t> samples(static_cast<size_t>(range.size()));
  for (int64_t i = 0; i < range.size(); ++i) {
    samples[static_cast<size_t>(i)] = sample_at(range.begin + i);
  }
  if (shuffle) {
    Rng rng({seed, 0, epoch, RngPurpose::kInBlockShuffle, static_cast<uint32_t>(block)});
    rng.shuffle(samples.data(), samples.size());
  }
  return samples;
}

std::vector<int64_t> DsTensor::samples_of_worker(uint64_t seed, uint32_t epoch, int worker,
                                                 int workers, bool shuffle) const {
  std::vector<int64_t> samples;
  for (int64_t block : blocks_of_worker(seed, epoch, worker, workers)) {
    const std::vector<int64_t> part = samples_of_block(block, seed, epoch, shuffle);
    samples.insert(samples.end(), part.begin(), part.end());
  }
  return samples;
}

DsTensor DsTensor::rechunk(int64_t row_blocks) const {
  return DsTensor(data_, order_, row_blocks, col_blocks_, owned_);
}

DsTensor DsTensor::global_shuffle(uint64_t seed) const {
  std::vector<int64_t> perm(static_cast<size_t>(num_samples()));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  Rng rng({seed, 0, 0, RngPurpose::kGlobalShuffle, 0});
  rng.shuffle(perm.data(), perm.size());
  for (int64_t& p : perm) p = sample_at(p);
  return DsTensor(data_, std::make_shared<const std::vector<int64_t>>(std::move(perm)), row_blocks_,
                  col_blocks_, owned_);
}

Dataset DsTensor::collect() const {
  if (!order_) return *data_;
  Dataset out;
  out.name = data_->name;
  out.num_classes = data_->num_classes;
  gather_batch(*data_, *order_, out.x, out.y);
  return out;
}

Dataset& DsTensor::own_storage() {
  if (!(owned_ && !order_ && data_.use_count() == 1)) {
    auto fresh = std::make_shared<Dataset>(collect());
    data_ = fresh;
    order_.reset();
    owned_ = true;
    return *fresh;
  }
  // Sole owner of a Dataset a DsTensor created non-const with make_shared: writing is legal.
  return const_cast<Dataset&>(*data_);
}

void DsTensor::apply(FunctionRef<void(int64_t block, Tensor& view)> fn) {
  Dataset& data = own_storage();
  const int64_t f = data.sample_numel();
  const Shape sample = data.sample_shape();
  float* x = data.x.data();
  for (int64_t r = 0; r < row_blocks_; ++r) {
    const IndexRange rows = row_range(r);
    if (col_blocks_ == 1) {
      Shape shape{rows.size()};
      shape.insert(shape.end(), sample.begin(), sample.end());
      Tensor view = Tensor::view(shape, x + rows.begin * f);
      fn(r, view);
      continue;
    }
    for (int64_t c = 0; c < col_blocks_; ++c) {
      const IndexRange cols = col_range(c);
      const auto width = static_cast<size_t>(cols.size());
      Tensor block({rows.size(), cols.size()});
      for (int64_t i = 0; i < rows.size(); ++i) {
        std::memcpy(block.data() + i * cols.size(), x + (rows.begin + i) * f + cols.begin,
                    width * sizeof(float));
      }
      fn(r * col_blocks_ + c, block);
      SYNC_CHECK(block.numel() == rows.size() * cols.size(), "apply changed block "
                                                                 << r * col_blocks_ + c << " to "
                                                                 << to_string(block.shape()));
      for (int64_t i = 0; i < rows.size(); ++i) {
        std::memcpy(x + (rows.begin + i) * f + cols.begin, block.data() + i * cols.size(),
                    width * sizeof(float));
      }
    }
  }
}

}  // namespace syncopate
