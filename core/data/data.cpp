// Datasets: Fashion-MNIST, synthetic generators, normalisation and scaling, batches, the DDP
// sampler (the CSV reader is in csv.cpp).
#include "core/data/data.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <numeric>
#include <string_view>

#include "core/base/check.hpp"
#include "core/base/rng.hpp"

namespace syncopate {

Shape Dataset::sample_shape() const {
  SYNC_CHECK(x.rank() >= 1, "dataset " << name << " has no sample axis");
  return Shape(x.shape().begin() + 1, x.shape().end());
}

int64_t Dataset::sample_numel() const { return numel(sample_shape()); }

// ---------------------------------------------------------------------------------------------
// Fashion-MNIST (read_idx: idx.cpp)
std::string default_fashion_mnist_dir() { return "/usr/share/datasets/fashion-mnist"; }

namespace {

// dir/name if it exists, else dir/name.gz if it exists, else "".
std::string find_plain_or_gz(const std::string& dir, const std::string& name) {
  const std::filesystem::path plain = std::filesystem::path(dir) / name;
  std::error_code ec;
  if (std::filesystem::is_regular_file(plain, ec)) return plain.string();
  const std::string gz = plain.string() + ".gz";
  if (std::filesystem::is_regular_file(gz, ec)) return gz;
  return "";
}

void check_magic(const IdxFile& idx, int ndims, const char* what) {
  if (static_cast<int>(idx.dims.size()) != ndims) {
    idx_error(idx.path, 0,
              "magic number " + hex32(0x800u + static_cast<uint32_t>(idx.dims.size())) +
                  " declares " + std::to_string(idx.dims.size()) + " dimensions; expected " +
                  hex32(0x800u + static_cast<uint32_t>(ndims)) + " (" + what + ")");
  }
}

}  // namespace

Dataset load_fashion_mnist(const std::string& dir, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  const std::string images_name = prefix + "-images-idx3-ubyte";
  const std::string labels_name = prefix + "-labels-idx1-ubyte";
  const std::string images_path = find_plain_or_gz(dir, images_name);
  const std::string labels_path = find_plain_or_gz(dir, labels_name);
  if (images_path.empty() || labels_path.empty()) {
    std::string missing;
    for (const auto* name : {&images_name, &labels_name}) {
      if (find_plain_or_gz(dir, *name).empty()) {
        const std::string p = (std::filesystem::path(dir) / *name).string();
        missing += (missing.empty() ? "" : ", ") + p + " (or " + p + ".gz)";
      }
    }
    throw UserError("Fashion-MNIST " + prefix + " set not found: missing " + missing +
                    "; install Debian's dataset-fashion-mnist package or set data.dir");
  }
  const IdxFile images = read_idx(images_path);
  check_magic(images, 3, "images");
  if (images.dims[1] != 28 || images.dims[2] != 28) {
    idx_error(images_path, 8,
              "image size " + std::to_string(images.dims[1]) + "x" +
                  std::to_string(images.dims[2]) + "; expected 28x28");
  }
  const IdxFile labels = read_idx(labels_path);
  check_magic(labels, 1, "labels");
  const int64_t n = images.dims[0];
  if (labels.dims[0] != n) {
    throw UserError(images_path + " holds " + std::to_string(n) + " images but " + labels_path +
                    " holds " + std::to_string(labels.dims[0]) + " labels; the counts must match");
  }
  Dataset data;
  data.name = std::string("fashion-mnist-") + (train ? "train" : "test");
  data.num_classes = 10;
  data.y = Tensor({n});
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t label = labels.data[static_cast<size_t>(i)];
    if (label >= 10) {
      idx_error(labels_path, 8 + i,
                "label " + std::to_string(label) + " out of range; allowed: 0..9");
    }
    data.y[i] = label;
  }
  data.x = Tensor({n, 1, 28, 28});
  float* x = data.x.data();
  const uint8_t* pixels = images.data.data();
  const size_t count = images.data.size();
  for (size_t i = 0; i < count; ++i) x[i] = static_cast<float>(pixels[i]) * (1.0f / 255.0f);
  return data;
}

// ---------------------------------------------------------------------------------------------
// Synthetic data
namespace {

// The stream of sample i: its own key, so sample i does not depend on n.
Rng sample_rng(uint64_t seed, int64_t i, uint32_t extra) {
  const auto u = static_cast<uint64_t>(i);
  return Rng({seed, static_cast<uint32_t>(u), static_cast<uint32_t>(u >> 32),
              RngPurpose::kSynthetic, extra});
}

void require_positive(int64_t value, const char* field) {
  if (value < 1) {
    throw UserError(std::string(field) + ": " + std::to_string(value) +
                    " is invalid; allowed: >= 1");
  }
}

}  // namespace

Dataset make_synthetic_classification(int64_t n, Shape sample_shape, int num_classes,
                                      uint64_t seed) {
  require_positive(n, "data.samples");
  if (num_classes < 2) {
    throw UserError("data.classes: " + std::to_string(num_classes) + " is invalid; allowed: >= 2");
  }
  for (int64_t d : sample_shape) require_positive(d, "data.sample_shape");
  const int64_t f = numel(sample_shape);
  std::vector<float> means(static_cast<size_t>(num_classes * f));
  for (int c = 0; c < num_classes; ++c) {
    Rng rng({seed, static_cast<uint32_t>(c), 0, RngPurpose::kSynthetic, 0});
    for (int64_t j = 0; j < f; ++j) means[static_cast<size_t>(c * f + j)] = rng.normal();
  }
  Dataset data;
  data.name = "synthetic-classification";
  data.num_classes = num_classes;
  Shape x_shape{n};
  x_shape.insert(x_shape.end(), sample_shape.begin(), sample_shape.end());
  data.x = Tensor(x_shape);
  data.y = Tensor({n});
  for (int64_t i = 0; i < n; ++i) {
    Rng rng = sample_rng(seed, i, 1);
    const auto c = static_cast<int64_t>(rng.below(static_cast<uint64_t>(num_classes)));
    data.y[i] = static_cast<float>(c);
    float* row = data.x.data() + i * f;
    const float* mean = means.data() + c * f;
    for (int64_t j = 0; j < f; ++j) row[j] = mean[j] + rng.normal();
  }
  return data;
}

Dataset make_synthetic_regression(int64_t n, int64_t features, int64_t targets, uint64_t seed,
                                  double noise) {
  require_positive(n, "data.samples");
  require_positive(features, "data.features");
  require_positive(targets, "data.targets");
  if (!(noise >= 0) || !std::isfinite(noise)) {
    throw UserError("data.noise: " + std::to_string(noise) + " is invalid; allowed: >= 0");
  }
  // Teacher: w is (targets, features), b is (targets).
  std::vector<double> w(static_cast<size_t>(targets * features)), b(static_cast<size_t>(targets));
  Rng teacher({seed, 0, 0, RngPurpose::kSynthetic, 2});
  const double scale = 1.0 / std::sqrt(static_cast<double>(features));
  for (double& v : w) v = teacher.normal() * scale;
  for (double& v : b) v = teacher.normal();
  Dataset data;
  data.name = "synthetic-regression";
  data.x = Tensor({n, features});
  data.y = Tensor({n, targets});
  for (int64_t i = 0; i < n; ++i) {
    Rng rng = sample_rng(seed, i, 3);
    float* x = data.x.data() + i * features;
    for (int64_t j = 0; j < features; ++j) x[j] = rng.normal();
    for (int64_t t = 0; t < targets; ++t) {
      double acc = b[static_cast<size_t>(t)];
      for (int64_t j = 0; j < features; ++j) acc += w[static_cast<size_t>(t * features + j)] * x[j];
      data.y[i * targets + t] = static_cast<float>(acc + noise * rng.normal());
    }
  }
  return data;
}

Dataset make_synthetic_friedman(int64_t n, int64_t features, int64_t targets, uint64_t seed,
                                double noise) {
  require_positive(n, "data.samples");
  if (features < 5) {
    throw UserError(
        "data.target_function = \"friedman\" needs at least 5 input features; the "
        "model takes " +
        std::to_string(features));
  }
  require_positive(targets, "data.targets");
  if (!(noise >= 0) || !std::isfinite(noise)) {
    throw UserError("data.noise: " + std::to_string(noise) + " is invalid; allowed: >= 0");
  }
  constexpr double kPi = 3.14159265358979323846;
  Dataset data;
  data.name = "synthetic-friedman";
  data.x = Tensor({n, features});
  data.y = Tensor({n, targets});
  for (int64_t i = 0; i < n; ++i) {
    Rng rng = sample_rng(seed, i, 4);
    float* x = data.x.data() + i * features;
    for (int64_t j = 0; j < features; ++j) x[j] = static_cast<float>(rng.uniform());
    double y =
        10 * std::sin(kPi * x[0] * x[1]) + 20 * (x[2] - 0.5) * (x[2] - 0.5) + 10 * x[3] + 5 * x[4];
    for (int64_t j = 5; j < features; ++j)
      y += 2 * std::sin(2 * kPi * x[j]) / static_cast<double>(j - 3);
    for (int64_t t = 0; t < targets; ++t)
      data.y[i * targets + t] = static_cast<float>(y + noise * rng.normal());
  }
  return data;
}

// ---------------------------------------------------------------------------------------------
// Normalisation
Normalizer fit_normalizer(const Dataset& data, bool per_feature) {
  const int64_t n = data.size();
  SYNC_CHECK(n > 0, "empty dataset " << data.name);
  const int64_t f = data.sample_numel();
  const int64_t groups = per_feature ? f : 1;
  std::vector<double> sum(static_cast<size_t>(f), 0.0), sq(static_cast<size_t>(f), 0.0);
  const float* x = data.x.data();
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < f; ++j) sum[static_cast<size_t>(j)] += x[i * f + j];
  }
  std::vector<double> mean(static_cast<size_t>(groups));
  const double per_group = per_feature ? static_cast<double>(n) : static_cast<double>(n * f);
  if (per_feature) {
    for (int64_t j = 0; j < f; ++j)
      mean[static_cast<size_t>(j)] = sum[static_cast<size_t>(j)] / per_group;
  } else {
    mean[0] = std::accumulate(sum.begin(), sum.end(), 0.0) / per_group;
  }
  // Second pass on centred values: no cancellation.
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < f; ++j) {
      const double d = x[i * f + j] - mean[per_feature ? static_cast<size_t>(j) : 0];
      sq[static_cast<size_t>(j)] += d * d;
    }
  }
  Normalizer out;
  for (int64_t g = 0; g < groups; ++g) {
    const double s =
        per_feature ? sq[static_cast<size_t>(g)] : std::accumulate(sq.begin(), sq.end(), 0.0);
    const double stddev = std::sqrt(s / per_group);
    out.mean.push_back(static_cast<float>(mean[static_cast<size_t>(g)]));
    out.stddev.push_back(stddev > 0 ? static_cast<float>(stddev) : 1.0f);
  }
  return out;
}

void apply(const Normalizer& normalizer, Dataset& data) {
  const int64_t n = data.size(), f = data.sample_numel();
  const size_t groups = normalizer.mean.size();
  SYNC_CHECK(
      groups == normalizer.stddev.size() && (groups == 1 || groups == static_cast<size_t>(f)),
      "normalizer of " << groups << " values for samples of " << f << " features");
  float* x = data.x.data();
  if (groups == 1) {
    const float m = normalizer.mean[0], s = normalizer.stddev[0];
    for (int64_t i = 0; i < n * f; ++i) x[i] = (x[i] - m) / s;
    return;
  }
  const float* m = normalizer.mean.data();
  const float* s = normalizer.stddev.data();
  for (int64_t i = 0; i < n; ++i) {
    float* row = x + i * f;
    for (int64_t j = 0; j < f; ++j) row[j] = (row[j] - m[j]) / s[j];
  }
}

Normalizer fit_scaling(const Tensor& values, Scaling kind) {
  Normalizer out;
  if (kind == Scaling::kNone) return out;
  const int64_t n = values.rank() == 0 ? 0 : values.dim(0);
  SYNC_CHECK(n > 0, "scaling fitted on no rows");
  const int64_t f = values.numel() / n;
  const float* v = values.data();
  for (int64_t j = 0; j < f; ++j) {
    double a = 0, b = 0;  // standard: mean, then sum of squares; min-max: min, max
    if (kind == Scaling::kStandard) {
      for (int64_t i = 0; i < n; ++i) a += v[i * f + j];
      a /= static_cast<double>(n);
      for (int64_t i = 0; i < n; ++i) b += (v[i * f + j] - a) * (v[i * f + j] - a);
      b = std::sqrt(b / static_cast<double>(n));
    } else {
      a = b = v[j];
      for (int64_t i = 1; i < n; ++i) {
        a = std::min<double>(a, v[i * f + j]);
        b = std::max<double>(b, v[i * f + j]);
      }
      b -= a;
    }
    out.mean.push_back(static_cast<float>(a));
    out.stddev.push_back(b > 0 ? static_cast<float>(b) : 1.0f);
  }
  return out;
}

void scale(const Normalizer& scaling, std::span<float> values) {
  const size_t f = scaling.mean.size();
  if (f == 0) return;
  SYNC_CHECK(values.size() % f == 0, values.size() << " values in columns of " << f);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = (values[i] - scaling.mean[i % f]) / scaling.stddev[i % f];
}

void unscale(const Normalizer& scaling, std::span<float> values) {
  const size_t f = scaling.mean.size();
  if (f == 0) return;
  SYNC_CHECK(values.size() % f == 0, values.size() << " values in columns of " << f);
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = values[i] * scaling.stddev[i % f] + scaling.mean[i % f];
}

void scale_split(Dataset& train, Dataset& test, Scaling features, Scaling targets) {
  const Normalizer x_scaling = fit_scaling(train.x, features);
  scale(x_scaling, train.x.span());
  scale(x_scaling, test.x.span());
  const Normalizer y_scaling = fit_scaling(train.y, targets);
  scale(y_scaling, train.y.span());
  scale(y_scaling, test.y.span());
  train.target_scaling = test.target_scaling = y_scaling;
}

std::pair<Dataset, Dataset> split_test_rows(const Dataset& all, double test_fraction,
                                            uint64_t seed) {
  const int64_t n = all.size();
  if (n < 2)
    throw UserError(all.name + ": " + std::to_string(n) + " rows; a train/test split needs 2");
  const auto wanted = static_cast<int64_t>(std::llround(static_cast<double>(n) * test_fraction));
  const int64_t n_test = std::clamp<int64_t>(wanted, 1, n - 1);
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  Rng rng({seed, 0, 0, RngPurpose::kTestSplit, 0});
  rng.shuffle(perm.data(), perm.size());
  std::vector<int64_t> test_rows(perm.begin(), perm.begin() + n_test),
      train_rows(perm.begin() + n_test, perm.end());
  std::sort(test_rows.begin(), test_rows.end());
  std::sort(train_rows.begin(), train_rows.end());
  std::pair<Dataset, Dataset> parts;
  parts.first.name = parts.second.name = all.name;
  parts.first.num_classes = parts.second.num_classes = all.num_classes;
  gather_batch(all, train_rows, parts.first.x, parts.first.y);
  gather_batch(all, test_rows, parts.second.x, parts.second.y);
  return parts;
}

// ---------------------------------------------------------------------------------------------
// Batches and the DDP sampler
void gather_batch(const Dataset& data, std::span<const int64_t> indices, Tensor& x, Tensor& y) {
  const auto b = static_cast<int64_t>(indices.size());
  const int64_t n = data.size();
  Shape x_shape = data.x.shape();
  x_shape[0] = b;
  Shape y_shape = data.y.shape();
  y_shape[0] = b;
  x.resize(x_shape);
  y.resize(y_shape);
  const int64_t fx = data.sample_numel();
  const int64_t fy = n > 0 ? data.y.numel() / n : 0;
  for (int64_t k = 0; k < b; ++k) {
    const int64_t i = indices[static_cast<size_t>(k)];
    SYNC_CHECK(i >= 0 && i < n, "sample index " << i << " out of 0.." << n - 1);
    std::memcpy(x.data() + k * fx, data.x.data() + i * fx, static_cast<size_t>(fx) * sizeof(float));
    std::memcpy(y.data() + k * fy, data.y.data() + i * fy, static_cast<size_t>(fy) * sizeof(float));
  }
}

std::vector<int64_t> global_permutation(int64_t n, uint64_t seed, uint32_t epoch) {
  SYNC_CHECK(n >= 0, n);
  std::vector<int64_t> perm(static_cast<size_t>(n));
  std::iota(perm.begin(), perm.end(), int64_t{0});
  Rng rng({seed, 0, epoch, RngPurpose::kGlobalPermutation, 0});
  rng.shuffle(perm.data(), perm.size());
  return perm;
}

int64_t ddp_steps_per_epoch(int64_t n, int workers, int64_t local_batch) {
  SYNC_CHECK(n >= 0 && workers >= 1 && local_batch >= 1,
             "n " << n << " workers " << workers << " local_batch " << local_batch);
  const int64_t global = workers * local_batch;
  return (n + global - 1) / global;
}

std::vector<int64_t> ddp_worker_indices(std::span<const int64_t> perm, int worker, int workers,
                                        int64_t local_batch, int64_t step) {
  const auto n = static_cast<int64_t>(perm.size());
  SYNC_CHECK(workers >= 1 && worker >= 0 && worker < workers && local_batch >= 1,
             "worker " << worker << " of " << workers << " local_batch " << local_batch);
  SYNC_CHECK(step >= 0 && step < ddp_steps_per_epoch(n, workers, local_batch),
             "step " << step << " of " << ddp_steps_per_epoch(n, workers, local_batch));
  const int64_t global = workers * local_batch;
  const int64_t begin = step * global;
  const int64_t m = std::min(global, n - begin);
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(local_batch));
  for (int64_t k = worker; k < m; k += workers) out.push_back(perm[static_cast<size_t>(begin + k)]);
  return out;
}

}  // namespace syncopate
