#pragma once
// Datasets: Fashion-MNIST from IDX(.gz) files, synthetic classification/regression generators,
// CSV regression tables; normalisation; batch gathering; the DDP baseline's sampler.
//
// A Dataset is (x, y): x is (N, sample...), y is (N) class indices stored as float for
// classification, or (N, k) targets for regression.
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/scenario/choices.hpp"
#include "core/tensor/tensor.hpp"

namespace syncopate {

// Per-group offsets and scales: v' = (v - mean) / stddev (for min-max scaling mean holds the
// minimum and stddev the range). One group for all values, or one per column.
struct Normalizer {
  std::vector<float> mean, stddev;
};

struct Dataset {
  std::string name;
  Tensor x;                   // (N, sample...)
  Tensor y;                   // (N) class index as float, or (N, k) regression targets
  int num_classes = 0;        // 0 for regression
  Normalizer target_scaling;  // y was scaled by this (empty: y is in its own units)
  int64_t size() const { return x.rank() == 0 ? 0 : x.dim(0); }
  Shape sample_shape() const;  // x's shape without the sample axis
  int64_t sample_numel() const;
};

// ---- IDX files (LeCun's MNIST format, also Fashion-MNIST's) ----
// Only unsigned-byte data (type 0x08) is supported: magic 0x00 0x00 0x08 ndims, then ndims
// big-endian uint32 dimensions, then the bytes, row-major.
struct IdxFile {
  std::string path;
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // numel(dims) bytes
};

// Reads a plain or gzip-compressed IDX file (zlib detects which). Throws UserError naming the
// path and the byte offset (in the uncompressed stream) where a missing, truncated or corrupt
// file went wrong: bad magic, unsupported type, zero dimensions, too few or too many bytes.
IdxFile read_idx(const std::string& path);
// The UserError of an IDX file that is wrong at a byte: "path: byte offset N: what".
[[noreturn]] void idx_error(const std::string& path, int64_t offset, const std::string& what);
// 0x%08x, for magic numbers in those messages.
std::string hex32(uint32_t v);

// Where Debian's dataset-fashion-mnist package puts the files.
std::string default_fashion_mnist_dir();

// train-images-idx3-ubyte / train-labels-idx1-ubyte (or t10k-*), each plain or with .gz (the
// plain one is preferred when both exist). x is (N, 1, 28, 28) in [0, 1], y holds labels 0..9.
Dataset load_fashion_mnist(const std::string& dir, bool train);

// ---- Synthetic data (RngPurpose::kSynthetic) ----
// Sample i depends only on (seed, i): a smaller n gives a prefix of a larger one.
// Classification: class c has a mean drawn from N(0, 1) per feature; a sample is its class's
// mean plus N(0, 1) noise; labels are uniform. Learnable: the optimal classifier is linear.
Dataset make_synthetic_classification(int64_t n, Shape sample_shape, int num_classes,
                                      uint64_t seed);
// Regression: y = W x + b + noise * N(0, 1), x ~ N(0, 1) per feature, W and b drawn from
// N(0, 1/features) and N(0, 1). x is (n, features), y is (n, targets).
Dataset make_synthetic_regression(int64_t n, int64_t features, int64_t targets, uint64_t seed,
                                  double noise);
// Nonlinear regression (Friedman's #1 function, extended to every feature): x ~ U(0, 1) per
// feature, y = 10 sin(pi x0 x1) + 20 (x2 - 0.5)^2 + 10 x3 + 5 x4
//              + sum over j >= 5 of 2 sin(2 pi x_j) / (j - 3) + noise * N(0, 1),
// the same for every target column. features >= 5.
Dataset make_synthetic_friedman(int64_t n, int64_t features, int64_t targets, uint64_t seed,
                                double noise);

// ---- CSV (csv.cpp) ----
// A comma-separated table: skip_rows lines (e.g. a metadata line), then a header row of column
// names, then data rows. Fields may be double-quoted ("CRIM"). The target columns become y
// (N, k) and the feature columns x (N, features), each in the given order; no feature column
// given: every column that is not a target, in file order. Only those columns are parsed (others
// may hold text). Errors name the file, the line, and for cells the data row and the column.
struct CsvOptions {
  std::vector<std::string> targets;   // data.targets
  std::vector<std::string> features;  // data.feature_columns
  int64_t skip_rows = 0;              // data.skip_rows
};
Dataset load_csv_regression(const std::string& path, const CsvOptions& options);
Dataset load_csv_regression(const std::string& path,
                            const std::vector<std::string>& target_columns);

// ---- Normalisation (of x) and scaling (of x or y, per column) ----
// Population mean and standard deviation, accumulated in double: one value for all of x
// (per_feature false), or one per element of a sample (per_feature true). A zero standard
// deviation is stored as 1, so constant features map to 0.
Normalizer fit_normalizer(const Dataset& data, bool per_feature);
void apply(const Normalizer& normalizer, Dataset& data);  // x = (x - mean) / stddev

// Per-column scaling of a (N, columns...) tensor: standard (mean, population stddev) or min-max
// (min, max - min); a zero spread is stored as 1. kNone gives an empty Normalizer.
Normalizer fit_scaling(const Tensor& values, Scaling kind);
// values = (values - mean) / stddev, or back: values * stddev + mean. Column j of a row of
// `columns` values uses group j; an empty Normalizer changes nothing.
void scale(const Normalizer& scaling, std::span<float> values);
void unscale(const Normalizer& scaling, std::span<float> values);

// Fits the scaling of x (features) and y (targets) on `train` and applies it to both sets;
// test.target_scaling and train.target_scaling record the targets' (to report in their units).
void scale_split(Dataset& train, Dataset& test, Scaling features, Scaling targets);

// A train/test split of a table without one: round(n * test_fraction) rows (at least 1, at most
// n - 1) drawn by a permutation that depends only on the seed (RngPurpose::kTestSplit); both
// parts keep the file's order.
std::pair<Dataset, Dataset> split_test_rows(const Dataset& all, double test_fraction,
                                            uint64_t seed);

// ---- Batches ----
// Resizes x to (B, sample...) and y to (B) or (B, k), B = indices.size(), and copies the rows.
void gather_batch(const Dataset& data, std::span<const int64_t> indices, Tensor& x, Tensor& y);

// ---- The DDP baseline's sampler ----
// A permutation of 0..n-1 that depends only on (seed, epoch) (RngPurpose::kGlobalPermutation),
// like DistributedSampler's set_epoch.
std::vector<int64_t> global_permutation(int64_t n, uint64_t seed, uint32_t epoch);
// Steps per epoch when every step consumes one global batch of workers * local_batch samples:
// ceil(n / (workers * local_batch)); the last global batch may be partial.
int64_t ddp_steps_per_epoch(int64_t n, int workers, int64_t local_batch);
// Worker `worker`'s samples in step `step`. Global batch s is perm[s*G, min((s+1)*G, n)),
// G = workers * local_batch, dealt strided as DistributedSampler does: worker w gets positions
// w, w + W, w + 2W, ... of it. A full global batch gives every worker local_batch samples; the
// last partial one of m samples is split as evenly as possible (sizes ceil(m/W) or floor(m/W),
// a worker may get none when m < W). Nothing is padded or dropped: over an epoch the workers'
// slices cover every sample exactly once. (PyTorch's DistributedSampler instead pads the
// permutation with repeated samples so that all workers get the same count.)
std::vector<int64_t> ddp_worker_indices(std::span<const int64_t> perm, int worker, int workers,
                                        int64_t local_batch, int64_t step);

}  // namespace syncopate
