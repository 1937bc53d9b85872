#pragma once
// The ds-tensor: a dataset split along the sample axis into R row blocks (and its flattened
// sample into C column blocks; the paper uses C = 1), as dislib's ds-array does.
//
// Block sizes: the remainder is kept, spread over the first blocks: with N samples and R
// blocks, block b holds floor(N/R) samples, plus one for b < N mod R (block sizes differ by at
// most one, as block_of() in comm.hpp). (The paper's code drops the remainder instead.)
// Columns are split the same way over the sample_numel() features of a flattened sample.
//
// Per epoch, a permutation seeded by (seed, epoch) orders the blocks and deals them
// round-robin to workers; samples may be shuffled inside a block, seeded by (seed, epoch,
// block). Every query is a pure function of its arguments, so each of W workers can call
// blocks_of_worker() on its own and all of them agree; the in-block order of a block does not
// depend on which worker trains it, nor on W.
//
// A DsTensor is a cheap handle: it shares the sample storage (a Dataset) with its copies and
// holds an order (which dataset sample sits at each position) and the grid. rechunk() and
// global_shuffle() return new handles over the same storage without copying samples; sample
// indices returned by the queries index dataset(), e.g. for gather_batch(). apply() is
// copy-on-write: it transforms the samples in place only when this handle is the sole owner
// of storage it created, and otherwise first materialises its own copy. Not thread-safe.
#include <cstdint>
#include <memory>
#include <vector>

#include "core/base/function_ref.hpp"
#include "core/data/data.hpp"

namespace syncopate {

// A half-open range of positions [begin, end).
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

// Part `i` of `n` items split into `parts`, sizes differing by at most one, larger ones first.
IndexRange even_part(int64_t n, int64_t parts, int64_t i);

class DsTensor {
 public:
  // Shares the dataset (no copy). Throws UserError unless 1 <= row_blocks <= N and
  // 1 <= col_blocks <= sample_numel.
  static DsTensor from_dataset(std::shared_ptr<const Dataset> data, int64_t row_blocks,
                               int64_t col_blocks = 1);
  // Takes the dataset over (move it in to avoid a copy).
  static DsTensor from_dataset(Dataset data, int64_t row_blocks, int64_t col_blocks = 1);

  const Dataset& dataset() const { return *data_; }  // what the sample indices index
  int64_t num_samples() const { return data_->size(); }
  int64_t num_row_blocks() const { return row_blocks_; }
  int64_t num_col_blocks() const { return col_blocks_; }
  IndexRange row_range(int64_t block) const;  // positions in the current order
  IndexRange col_range(int64_t block) const;  // features of a flattened sample
  // The dataset index of the sample at position i.
  int64_t sample_at(int64_t position) const {
    return order_ ? (*order_)[static_cast<size_t>(position)] : position;
  }

  // A permutation of 0..R-1 (RngPurpose::kBlockPermutation, keyed by seed and epoch).
  std::vector<int64_t> block_permutation(uint64_t seed, uint32_t epoch) const;
  // perm[worker], perm[worker + workers], ...; empty when worker >= R.
  std::vector<int64_t> blocks_of_worker(uint64_t seed, uint32_t epoch, int worker,
                                        int workers) const;
  // Dataset indices of a block's samples, in order or shuffled (RngPurpose::kInBlockShuffle,
  // keyed by seed, epoch and block).
  std::vector<int64_t> samples_of_block(int64_t block, uint64_t seed, uint32_t epoch,
                                        bool shuffle) const;
  // The samples of the worker's blocks, concatenated in the order blocks_of_worker() gives.
  std::vector<int64_t> samples_of_worker(uint64_t seed, uint32_t epoch, int worker, int workers,
                                         bool shuffle) const;

  // Same samples and order, R' row blocks (same column blocks).
  DsTensor rechunk(int64_t row_blocks) const;
  // The sample axis permuted (RngPurpose::kGlobalShuffle, keyed by seed), still R x C blocked.
  DsTensor global_shuffle(uint64_t seed) const;
  // Calls fn(block, view) for every block in grid order (row-major: block = r * C + c), view
  // being that block's x values as (rows, sample...) when C = 1, or (rows, columns) of the
  // flattened samples when C > 1. Changes to the view are written back. y is untouched.
  void apply(FunctionRef<void(int64_t block, Tensor& view)> fn);
  // The samples materialised in the current order (x and y copied).
  Dataset collect() const;

 private:
  DsTensor(std::shared_ptr<const Dataset> data, std::shared_ptr<const std::vector<int64_t>> order,
           int64_t row_blocks, int64_t col_blocks, bool owned);
  // Makes this handle the sole owner of contiguous storage in identity order.
  Dataset& own_storage();

  std::shared_ptr<const Dataset> data_;
  std::shared_ptr<const std::vector<int64_t>> order_;  // null: identity
  int64_t row_blocks_ = 1;
  int64_t col_blocks_ = 1;
  bool owned_ = false;  // data_ was created by a DsTensor (never const), so may be written
};

}  // namespace syncopate
