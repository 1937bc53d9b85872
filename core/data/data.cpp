// Datasets: Fashion-MNIST, synthetic generators, the CSV reader, normalisation, batches, the DDP
// sampler.
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

// ---------------------------------------------------------------------------------------------
// CSV
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    fields.push_back(
        trim(line.substr(start, comma == std::string_view::npos ? comma : comma - start)));
    if (comma == std::string_view::npos) return fields;
    start = comma + 1;
  }
}

[[noreturn]] void csv_error(const std::string& path, int64_t line, const std::string& what) {
  throw UserError(path + ":" + std::to_string(line) + ": " + what);
}

}  // namespace

Dataset load_csv_regression(const std::string& path,
                            const std::vector<std::string>& target_columns) {
  std::error_code status;
  if (!std::filesystem::is_regular_file(path, status))
    throw UserError(path + ": CSV file not found (or not a regular file)");
  std::ifstream in(path);
  if (!in) throw UserError(path + ": cannot open CSV file: " + std::strerror(errno));
  std::string line;
  int64_t line_no = 0;
  // Header: the first non-blank line.
  std::vector<std::string> header;
  while (header.empty() && std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    for (std::string_view f : split_fields(line)) header.emplace_back(f);
  }
  if (header.empty()) csv_error(path, line_no, "empty file; a header row is required");
  for (size_t c = 0; c < header.size(); ++c) {
    if (header[c].empty()) {
      csv_error(path, line_no, "header: column " + std::to_string(c + 1) + " has no name");
    }
    for (size_t d = 0; d < c; ++d) {
      if (header[d] == header[c])
        csv_error(path, line_no, "header: duplicate column '" + header[c] + "'");
    }
  }
  if (target_columns.empty()) {
    throw UserError(path +
                    ": data.targets: no target column given; allowed: columns of the header");
  }
  std::vector<char> is_target(header.size(), 0);
  std::vector<size_t> target_index;
  for (const std::string& name : target_columns) {
    const auto it = std::find(header.begin(), header.end(), name);
    if (it == header.end()) {
      std::string names;
      for (const std::string& h : header) names += (names.empty() ? "" : ", ") + h;
      csv_error(path, line_no, "target column '" + name + "' not in the header; columns: " + names);
    }
    const auto c = static_cast<size_t>(it - header.begin());
    if (is_target[c]) csv_error(path, line_no, "target column '" + name + "' given twice");
    is_target[c] = 1;
    target_index.push_back(c);
  }
  const auto targets = static_cast<int64_t>(target_index.size());
  const auto features = static_cast<int64_t>(header.size()) - targets;
  if (features == 0) csv_error(path, line_no, "every column is a target; no feature column left");
  std::vector<float> xs, ys, row(header.size());
  int64_t n = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (trim(line).empty()) continue;
    const std::vector<std::string_view> fields = split_fields(line);
    if (fields.size() != header.size()) {
      csv_error(path, line_no,
                "expected " + std::to_string(header.size()) + " fields, found " +
                    std::to_string(fields.size()));
    }
    for (size_t c = 0; c < fields.size(); ++c) {
      const std::string_view f = fields[c];
      double value = 0;
      const auto [end, ec] = std::from_chars(f.data(), f.data() + f.size(), value);
      if (f.empty() || ec != std::errc() || end != f.data() + f.size() || !std::isfinite(value)) {
        csv_error(path, line_no,
                  "column '" + header[c] + "': '" + std::string(f) + "' is not a finite number");
      }
      if (std::abs(value) > std::numeric_limits<float>::max()) {  // values are stored as float
        csv_error(path, line_no,
                  "column '" + header[c] + "': '" + std::string(f) + "' is too large for float");
      }
      row[c] = static_cast<float>(value);
    }
    for (size_t c = 0; c < row.size(); ++c) {
      if (!is_target[c]) xs.push_back(row[c]);
    }
    for (size_t c : target_index) ys.push_back(row[c]);
    ++n;
  }
  if (n == 0) csv_error(path, line_no, "no data rows after the header");
  Dataset data;
  data.name = std::filesystem::path(path).stem().string();
  data.x = Tensor({n, features}, std::move(xs));
  data.y = Tensor({n, targets}, std::move(ys));
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
