// Loading the scenario's datasets (Fashion-MNIST, synthetic, CSV), their prefixes and splits,
// the cost-only stand-in, the ds-tensor over the training set and the workers' partitions.
#include "core/train/train_data.hpp"

#include <algorithm>
#include <utility>

#include "core/base/check.hpp"
#include "core/base/huge_pages.hpp"
#include "core/nn/model.hpp"

namespace syncopate {
namespace {

// Prefix of a dataset (the first n samples).
Dataset head(Dataset data, int64_t n) {
  if (n <= 0 || n >= data.size()) return data;
  std::vector<int64_t> indices(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) indices[static_cast<size_t>(i)] = i;
  Dataset out;
  out.name = data.name;
  out.num_classes = data.num_classes;
  gather_batch(data, indices, out.x, out.y);
  return out;
}

// The first n_train samples for training, the rest for testing.
std::pair<Dataset, Dataset> split(const Dataset& all, int64_t n_train) {
  std::vector<int64_t> first(static_cast<size_t>(n_train)),
      rest(static_cast<size_t>(all.size() - n_train));
  for (int64_t i = 0; i < all.size(); ++i)
    (i < n_train ? first[static_cast<size_t>(i)] : rest[static_cast<size_t>(i - n_train)]) = i;
  std::pair<Dataset, Dataset> parts;
  parts.first.name = parts.second.name = all.name;
  parts.first.num_classes = parts.second.num_classes = all.num_classes;
  gather_batch(all, first, parts.first.x, parts.first.y);
  gather_batch(all, rest, parts.second.x, parts.second.y);
  return parts;
}

// The scenario's training and test sets, shaped for a model taking `sample` and giving
// `outputs` values. Synthetic sets are one draw split in two (train and test share the classes).
std::pair<Dataset, Dataset> load_datasets(const Scenario& s, const Shape& sample, int64_t outputs) {
  const DatasetKind kind = s.data.dataset;
  if (kind == DatasetKind::kFashionMnist) {
    const std::string dir = s.data.dir.empty() ? default_fashion_mnist_dir() : s.data.dir;
    return {load_fashion_mnist(dir, true), load_fashion_mnist(dir, false)};
  }
  const int64_t n = s.data.train_samples > 0 ? s.data.train_samples : 10000;
  const int64_t nt = s.data.test_samples > 0 ? s.data.test_samples : n / 5;
  if (kind == DatasetKind::kSynthetic)
    return split(make_synthetic_classification(n + nt, sample, static_cast<int>(outputs), s.seed),
                 n);
  if (kind == DatasetKind::kSyntheticRegression) {
    const bool friedman = s.data.target_function == TargetFunction::kFriedman;
    Dataset all =
        friedman ? make_synthetic_friedman(n + nt, numel(sample), outputs, s.seed, s.data.noise)
                 : make_synthetic_regression(n + nt, numel(sample), outputs, s.seed, s.data.noise);
    Shape x_shape{n + nt};
    x_shape.insert(x_shape.end(), sample.begin(), sample.end());
    all.x.reshape(x_shape);
    return split(all, n);
  }
  const Dataset all = load_csv_regression(s.data.path, {.targets = s.data.targets,
                                                        .features = s.data.feature_columns,
                                                        .skip_rows = s.data.skip_rows});
  if (all.sample_numel() != numel(sample) || all.y.dim(1) != outputs)
    throw UserError(s.data.path_where + ": " + s.data.path + " gives " +
                    std::to_string(all.sample_numel()) + " feature and " +
                    std::to_string(all.y.dim(1)) + " target columns, model " + s.model.spec().name +
                    " takes " + std::to_string(numel(sample)) + " inputs and gives " +
                    std::to_string(outputs) +
                    " outputs (choose the columns with data.feature_columns and data.targets)");
  return split_test_rows(all, s.data.test_fraction, s.seed);
}

// Cost-only runs read no data: a shape-only training set of the scenario's size.
Dataset cost_only_train_set(const Scenario& s, const Shape& sample, int64_t outputs) {
  int64_t n = s.sim.cost_only_train_samples;
  if (n <= 0) n = s.data.train_samples > 0 ? s.data.train_samples : 60000;
  Dataset shapes;
  shapes.name = "cost-only";
  Shape x_shape{n};
  x_shape.insert(x_shape.end(), sample.begin(), sample.end());
  shapes.x = Tensor::shape_only(x_shape);
  shapes.y = Tensor::shape_only({n});
  shapes.num_classes = static_cast<int>(outputs);
  return shapes;
}

// The workers' partitions (null for iid). fixed in the block order: the ds-tensor's blocks as
// dealt for epoch 0, kept every epoch.
std::shared_ptr<const Partition> make_partition(const Scenario& s, const TrainData& data) {
  const Dataset& train = *data.train;
  switch (s.data.partition) {
    case DataPartition::kIid:
      return nullptr;
    case DataPartition::kFixed: {
      if (s.data_order() == DataOrder::kGlobal)
        return std::make_shared<const Partition>(fixed_partition(train.size(), s.workers, s.seed));
      Partition p;
      for (int w = 0; w < s.workers; ++w) {
        p.samples.push_back(data.blocks->samples_of_worker(s.seed, 0, w, s.workers, false));
        std::sort(p.samples.back().begin(), p.samples.back().end());
      }
      return std::make_shared<const Partition>(std::move(p));
    }
    case DataPartition::kDirichlet:
      return std::make_shared<const Partition>(dirichlet_partition(
          class_labels(train), train.num_classes, s.workers, s.data.alpha, s.seed));
    case DataPartition::kShards: {
      if (s.data.shards_per_worker > train.size() / s.workers)
        throw UserError(s.source + ": data.shards_per_worker: " + std::to_string(s.workers) +
                        " workers x " + std::to_string(s.data.shards_per_worker) + " shards for " +
                        std::to_string(train.size()) + " training samples");
      return std::make_shared<const Partition>(
          shards_partition(class_labels(train), s.workers, s.data.shards_per_worker, s.seed));
    }
  }
  return nullptr;
}

}  // namespace

TrainData prepare_data(const Scenario& s, bool cost_only) {
  TrainData data;
  auto model = make_model(s.model.spec(), Storage::kShapeOnly);
  const Shape sample = model->sample_shape();
  const int64_t outputs = model->output_shape(1).back();
  if (cost_only) {
    data.train = std::make_shared<const Dataset>(cost_only_train_set(s, sample, outputs));
  } else {
    auto [train, test] = load_datasets(s, sample, outputs);
    train = head(std::move(train), s.data.train_samples);
    test = head(std::move(test), s.data.test_samples);
    if (s.data.normalize) {
      const Normalizer norm = fit_normalizer(train, false);
      apply(norm, train);
      apply(norm, test);
    }
    const bool regression = s.loss != LossKind::kCrossEntropy;
    scale_split(train, test, s.data.normalize ? Scaling::kNone : s.data.scale_features,
                regression ? s.data.scale_targets : Scaling::kNone);
    // Every step gathers its batch from all over the training set (core/base/huge_pages.hpp).
    advise_huge_pages(train.x.data(), static_cast<size_t>(train.x.numel()) * sizeof(float));
    data.train = std::make_shared<const Dataset>(std::move(train));
    data.test = std::make_shared<const Dataset>(std::move(test));
  }
  if (s.data_order() == DataOrder::kBlocks) {
    const int64_t blocks = s.row_blocks();
    if (blocks > data.train->size())
      throw UserError(s.source + ": data.blocks: " + std::to_string(blocks) + " blocks for " +
                      std::to_string(data.train->size()) + " samples");
    data.blocks = DsTensor::from_dataset(data.train, blocks);
  }
  data.partition = make_partition(s, data);
  if (data.partition && !cost_only && data.train->num_classes > 0)
    data.partitions_csv = partitions_csv(
        class_histogram(*data.partition, class_labels(*data.train), data.train->num_classes));
  return data;
}

}  // namespace syncopate
