// Datasets: IDX files crafted, truncated and corrupt, the real Fashion-MNIST, synthetic sets, CSV,
// normalisation.
#include "core/data/data.hpp"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

// GCC 12 reports a false maybe-uninitialized inside its AVX-512 intrinsics used by Eigen.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Dense>
#pragma GCC diagnostic pop

#include "core/base/check.hpp"
#include "tests/common/user_error.hpp"

namespace syncopate {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() / ("syncopate-data-" + std::to_string(getpid()) + "-" +
                                         info->test_suite_name() + "-" + info->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

void write_plain(const std::string& path, const Bytes& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

void write_gz(const std::string& path, const Bytes& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
            static_cast<int>(bytes.size()));
  gzclose(f);
}

void put_u32(Bytes& b, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) b.push_back(static_cast<uint8_t>(v >> shift));
}

// An IDX file of unsigned bytes: magic 0x000008NN, dims, then data.
Bytes idx_bytes(const std::vector<uint32_t>& dims, const Bytes& data) {
  Bytes b = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) put_u32(b, d);
  b.insert(b.end(), data.begin(), data.end());
  return b;
}

Bytes iota_bytes(size_t n, int start = 0) {
  Bytes b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((start + static_cast<int>(i)) % 256);
  return b;
}

TEST(Idx, ReadsPlainAndGzip) {
  TempDir dir;
  const Bytes data = iota_bytes(24, 7);
  write_plain(dir.file("a.idx"), idx_bytes({2, 3, 4}, data));
  write_gz(dir.file("a.idx.gz"), idx_bytes({2, 3, 4}, data));
  for (const std::string name : {"a.idx", "a.idx.gz"}) {
    const IdxFile idx = read_idx(dir.file(name));
    EXPECT_EQ(idx.dims, (std::vector<int64_t>{2, 3, 4})) << name;
    EXPECT_EQ(idx.data, data) << name;
  }
}

TEST(Idx, TruncatedBadMagicTrailingAndMissing) {
  TempDir dir;
  // Declares 2*3*4 = 24 data bytes after a 16-byte header but holds 10: the file ends at 26.
  Bytes truncated = idx_bytes({2, 3, 4}, iota_bytes(10));
  write_plain(dir.file("t.idx"), truncated);
  std::string msg = error_of([&] { read_idx(dir.file("t.idx")); });
  EXPECT_TRUE(has(msg, dir.file("t.idx"))) << msg;
  EXPECT_TRUE(has(msg, "offset 26")) << msg;
  EXPECT_TRUE(has(msg, "truncated")) << msg;
  // Truncated inside the header (dims): 4 + 2 bytes.
  write_plain(dir.file("h.idx"), Bytes{0, 0, 8, 3, 0, 0});
  msg = error_of([&] { read_idx(dir.file("h.idx")); });
  EXPECT_TRUE(has(msg, "offset 6")) << msg;
  // A gzip stream cut in half: corrupt compressed data, still names the file and an offset.
  write_gz(dir.file("full.gz"), idx_bytes({100, 100}, iota_bytes(10000)));
  std::ifstream in(dir.file("full.gz"), std::ios::binary);
  Bytes gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  gz.resize(gz.size() / 2);
  write_plain(dir.file("cut.gz"), gz);
  msg = error_of([&] { read_idx(dir.file("cut.gz")); });
  EXPECT_TRUE(has(msg, dir.file("cut.gz"))) << msg;
  EXPECT_TRUE(has(msg, "offset")) << msg;
  // Bad magic: first byte not zero; unsupported type 0x09.
  Bytes bad = idx_bytes({4}, iota_bytes(4));
  bad[0] = 0x12;
  write_plain(dir.file("m.idx"), bad);
  msg = error_of([&] { read_idx(dir.file("m.idx")); });
  EXPECT_TRUE(has(msg, "magic")) << msg;
  EXPECT_TRUE(has(msg, "offset 0")) << msg;
  bad[0] = 0;
  bad[2] = 0x09;
  write_plain(dir.file("m.idx"), bad);
  msg = error_of([&] { read_idx(dir.file("m.idx")); });
  EXPECT_TRUE(has(msg, "offset 2")) << msg;
  // Trailing bytes after the declared data start at offset 8 + 4 = 12.
  write_plain(dir.file("x.idx"), idx_bytes({4}, iota_bytes(6)));
  msg = error_of([&] { read_idx(dir.file("x.idx")); });
  EXPECT_TRUE(has(msg, "offset 12")) << msg;
  // A zero dimension.
  write_plain(dir.file("z.idx"), idx_bytes({0}, {}));
  EXPECT_TRUE(has(error_of([&] { read_idx(dir.file("z.idx")); }), "offset 4"));
  msg = error_of([&] { read_idx(dir.file("nope.idx")); });
  EXPECT_TRUE(has(msg, dir.file("nope.idx"))) << msg;
}

// A small Fashion-MNIST-shaped set: n images of 28x28 and their labels.
void write_fashion(const TempDir& dir, const std::string& prefix, uint32_t n_images,
                   const Bytes& labels, bool gz) {
  const Bytes images = idx_bytes({n_images, 28, 28}, iota_bytes(size_t{n_images} * 784, 3));
  const Bytes label_file = idx_bytes({static_cast<uint32_t>(labels.size())}, labels);
  const std::string ext = gz ? ".gz" : "";
  (gz ? write_gz : write_plain)(dir.file(prefix + "-images-idx3-ubyte" + ext), images);
  (gz ? write_gz : write_plain)(dir.file(prefix + "-labels-idx1-ubyte" + ext), label_file);
}

TEST(FashionMnist, CraftedFilesPlainAndGzip) {
  TempDir dir;
  write_fashion(dir, "train", 3, {9, 0, 4}, false);
  write_fashion(dir, "t10k", 2, {1, 2}, true);
  const Dataset train = load_fashion_mnist(fs::path(dir.file("")).string(), true);
  EXPECT_EQ(train.x.shape(), (Shape{3, 1, 28, 28}));
  EXPECT_EQ(train.y.shape(), (Shape{3}));
  EXPECT_EQ(train.num_classes, 10);
  EXPECT_EQ(train.y[0], 9.0f);
  EXPECT_EQ(train.y[2], 4.0f);
  for (int64_t i : {0, 1, 252, 783, 784, 2351}) {
    EXPECT_FLOAT_EQ(train.x[i], static_cast<float>((i + 3) % 256) / 255.0f) << i;
  }
  const Dataset test = load_fashion_mnist(dir.file(""), false);
  EXPECT_EQ(test.size(), 2);
  EXPECT_EQ(test.y[1], 2.0f);
}

TEST(FashionMnist, Errors) {
  TempDir dir;
  std::string msg = error_of([&] { load_fashion_mnist(dir.file(""), true); });
  EXPECT_TRUE(has(msg, dir.file("train-images-idx3-ubyte"))) << msg;
  EXPECT_TRUE(has(msg, dir.file("train-labels-idx1-ubyte"))) << msg;
  EXPECT_TRUE(has(msg, "dataset-fashion-mnist")) << msg;
  EXPECT_TRUE(has(msg, "data.dir")) << msg;
  // Count mismatch: 3 images, 2 labels.
  write_fashion(dir, "train", 3, {1, 2}, false);
  msg = error_of([&] { load_fashion_mnist(dir.file(""), true); });
  EXPECT_TRUE(has(msg, "3 images")) << msg;
  EXPECT_TRUE(has(msg, "2 labels")) << msg;
  // Label 10 at index 2: byte offset 8 + 2.
  write_fashion(dir, "train", 3, {1, 2, 10}, false);
  msg = error_of([&] { load_fashion_mnist(dir.file(""), true); });
  EXPECT_TRUE(has(msg, "offset 10")) << msg;
  EXPECT_TRUE(has(msg, dir.file("train-labels-idx1-ubyte"))) << msg;
  // Wrong image size 27x28, then a labels file with two dimensions.
  write_fashion(dir, "train", 1, {1}, false);
  write_plain(dir.file("train-images-idx3-ubyte"), idx_bytes({1, 27, 28}, iota_bytes(756)));
  msg = error_of([&] { load_fashion_mnist(dir.file(""), true); });
  EXPECT_TRUE(has(msg, "27x28")) << msg;
  write_fashion(dir, "train", 1, {1}, false);
  write_plain(dir.file("train-labels-idx1-ubyte"), idx_bytes({1, 1}, {1}));
  msg = error_of([&] { load_fashion_mnist(dir.file(""), true); });
  EXPECT_TRUE(has(msg, "0x00000801")) << msg;
}

// Debian's dataset-fashion-mnist is a declared test dependency: absent files fail this test.
TEST(FashionMnist, RealDataset) {
  const std::string dir = default_fashion_mnist_dir();
  EXPECT_EQ(dir, "/usr/share/datasets/fashion-mnist");
  for (bool train : {true, false}) {
    const Dataset d = load_fashion_mnist(dir, train);
    const int64_t n = train ? 60000 : 10000;
    ASSERT_EQ(d.x.shape(), (Shape{n, 1, 28, 28}));
    ASSERT_EQ(d.y.shape(), (Shape{n}));
    const auto [lo, hi] = std::minmax_element(d.x.span().begin(), d.x.span().end());
    EXPECT_EQ(*lo, 0.0f);
    EXPECT_EQ(*hi, 1.0f);
    std::vector<int64_t> histogram(10, 0);
    for (float label : d.y.span()) ++histogram[static_cast<size_t>(label)];
    for (int64_t count : histogram) EXPECT_EQ(count, n / 10);
  }
}

TEST(Csv, GoodTable) {
  TempDir dir;
  std::ofstream(dir.file("t.csv")) << "a, target2 ,b,target1\r\n1,2,3,4\n\n-1.5, 1e2 ,0,7\n";
  const Dataset d = load_csv_regression(dir.file("t.csv"), {"target1", "target2"});
  EXPECT_EQ(d.x.shape(), (Shape{2, 2}));
  EXPECT_EQ(d.y.shape(), (Shape{2, 2}));
  EXPECT_EQ(d.num_classes, 0);
  EXPECT_EQ(std::vector<float>(d.x.span().begin(), d.x.span().end()),
            (std::vector<float>{1, 3, -1.5f, 0}));
  EXPECT_EQ(std::vector<float>(d.y.span().begin(), d.y.span().end()),
            (std::vector<float>{4, 2, 7, 100}));
}

TEST(Csv, BadTables) {
  TempDir dir;
  const std::string path = dir.file("bad.csv");
  std::ofstream(path) << "a,b,y\n1,2,3\n4,oops,6\n";
  std::string msg = error_of([&] { load_csv_regression(path, {"y"}); });
  EXPECT_TRUE(has(msg, path + ":3")) << msg;
  EXPECT_TRUE(has(msg, "'b'")) << msg;
  EXPECT_TRUE(has(msg, "oops")) << msg;
  std::ofstream(path) << "a,b,y\n1,2,3\n4,5\n";
  msg = error_of([&] { load_csv_regression(path, {"y"}); });
  EXPECT_TRUE(has(msg, path + ":3")) << msg;
  EXPECT_TRUE(has(msg, "expected 3 fields, found 2")) << msg;
  std::ofstream(path) << "a,b,y\n1,2,3\n";
  msg = error_of([&] { load_csv_regression(path, {"z"}); });
  EXPECT_TRUE(has(msg, path + ":1")) << msg;
  EXPECT_TRUE(has(msg, "'z'")) << msg;
  EXPECT_TRUE(has(error_of([&] {
                    load_csv_regression(path, {"a", "b", "y"});
                  }),
                  "no feature column"));
  std::ofstream(path) << "";
  EXPECT_TRUE(has(error_of([&] { load_csv_regression(path, {"y"}); }), "header"));
  std::ofstream(path) << "a,y\n";
  EXPECT_TRUE(has(error_of([&] { load_csv_regression(path, {"y"}); }), "no data rows"));
  EXPECT_TRUE(has(error_of([&] { load_csv_regression(dir.file("none.csv"), {"y"}); }),
                  dir.file("none.csv")));
}

TEST(Synthetic, ClassificationReproducibleAndLearnable) {
  const Dataset a = make_synthetic_classification(2000, {4, 5}, 4, 42);
  const Dataset b = make_synthetic_classification(2000, {4, 5}, 4, 42);
  const Dataset c = make_synthetic_classification(2000, {4, 5}, 4, 43);
  const Dataset prefix = make_synthetic_classification(100, {4, 5}, 4, 42);
  EXPECT_EQ(a.x.shape(), (Shape{2000, 4, 5}));
  EXPECT_EQ(a.num_classes, 4);
  EXPECT_TRUE(std::equal(a.x.span().begin(), a.x.span().end(), b.x.span().begin()));
  EXPECT_TRUE(std::equal(a.y.span().begin(), a.y.span().end(), b.y.span().begin()));
  EXPECT_FALSE(std::equal(a.x.span().begin(), a.x.span().end(), c.x.span().begin()));
  EXPECT_TRUE(std::equal(prefix.x.span().begin(), prefix.x.span().end(), a.x.span().begin()));
  // Learnable: nearest class mean (means estimated on the first half) classifies the second
  // half far above chance (1/4). With 20 features of unit-variance class means and unit noise
  // the Bayes error is tiny.
  const int64_t f = 20, half = 1000;
  std::vector<double> means(4 * f, 0.0), counts(4, 0.0);
  for (int64_t i = 0; i < half; ++i) {
    const auto k = static_cast<int64_t>(a.y[i]);
    ASSERT_TRUE(k >= 0 && k < 4);
    counts[static_cast<size_t>(k)] += 1;
    for (int64_t j = 0; j < f; ++j) means[static_cast<size_t>(k * f + j)] += a.x[i * f + j];
  }
  for (int k = 0; k < 4; ++k) {
    EXPECT_GT(counts[static_cast<size_t>(k)], 180);  // uniform labels: ~250 each
    for (int64_t j = 0; j < f; ++j)
      means[static_cast<size_t>(k * f + j)] /= counts[static_cast<size_t>(k)];
  }
  int correct = 0;
  for (int64_t i = half; i < 2000; ++i) {
    int best = 0;
    double best_d = 1e300;
    for (int k = 0; k < 4; ++k) {
      double d = 0;
      for (int64_t j = 0; j < f; ++j)
        d += std::pow(a.x[i * f + j] - means[static_cast<size_t>(k * f + j)], 2);
      if (d < best_d) best_d = d, best = k;
    }
    correct += best == static_cast<int>(a.y[i]);
  }
  EXPECT_GT(correct, 900);
}

TEST(Synthetic, RegressionIsLinearPlusNoise) {
  // Noise 0: an exact linear map (with bias) fits; noise 0.5: residual std ~ 0.5.
  for (double noise : {0.0, 0.5}) {
    const Dataset d = make_synthetic_regression(400, 3, 2, 7, noise);
    ASSERT_EQ(d.x.shape(), (Shape{400, 3}));
    ASSERT_EQ(d.y.shape(), (Shape{400, 2}));
    Eigen::MatrixXd a(400, 4), y(400, 2);
    for (int i = 0; i < 400; ++i) {
      for (int j = 0; j < 3; ++j) a(i, j) = d.x[i * 3 + j];
      a(i, 3) = 1;
      for (int t = 0; t < 2; ++t) y(i, t) = d.y[i * 2 + t];
    }
    const Eigen::MatrixXd w = a.colPivHouseholderQr().solve(y);
    const double rms = std::sqrt((a * w - y).squaredNorm() / 800);
    if (noise == 0) {
      EXPECT_LT(rms, 1e-5);
    } else {
      EXPECT_NEAR(rms, 0.5, 0.05);
    }
  }
  const Dataset a = make_synthetic_regression(50, 3, 2, 7, 0.1);
  const Dataset b = make_synthetic_regression(50, 3, 2, 7, 0.1);
  EXPECT_TRUE(std::equal(a.y.span().begin(), a.y.span().end(), b.y.span().begin()));
  EXPECT_THROW(make_synthetic_regression(0, 3, 2, 7, 0.1), UserError);
  EXPECT_THROW(make_synthetic_classification(10, {3}, 1, 7), UserError);
}

TEST(Normalizer, GlobalAndPerFeature) {
  Dataset d = make_synthetic_classification(500, {3}, 3, 1);
  for (int64_t i = 0; i < 500; ++i) {
    d.x[i * 3 + 0] = d.x[i * 3 + 0] * 5 + 100;  // shifted, scaled feature
    d.x[i * 3 + 2] = 2.5f;                      // constant feature
  }
  Dataset g = d;
  const Normalizer global = fit_normalizer(g, false);
  ASSERT_EQ(global.mean.size(), 1u);
  apply(global, g);
  double sum = 0, sq = 0;
  for (float v : g.x.span()) sum += v, sq += double{v} * v;
  EXPECT_NEAR(sum / 1500, 0, 1e-5);
  EXPECT_NEAR(sq / 1500, 1, 1e-4);

  const Normalizer per = fit_normalizer(d, true);
  ASSERT_EQ(per.mean.size(), 3u);
  EXPECT_EQ(per.stddev[2], 1.0f);  // zero variance stored as 1
  apply(per, d);
  for (int j = 0; j < 3; ++j) {
    double s = 0, s2 = 0;
    for (int64_t i = 0; i < 500; ++i)
      s += d.x[i * 3 + j], s2 += double{d.x[i * 3 + j]} * d.x[i * 3 + j];
    EXPECT_NEAR(s / 500, 0, 1e-5) << j;
    EXPECT_NEAR(s2 / 500, j == 2 ? 0 : 1, 1e-4) << j;
  }
}

TEST(Batch, GatherCopiesRows) {
  const Dataset d = make_synthetic_regression(10, 3, 2, 1, 0.1);
  Tensor x, y;
  const std::vector<int64_t> idx = {7, 0, 7};
  gather_batch(d, idx, x, y);
  EXPECT_EQ(x.shape(), (Shape{3, 3}));
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  for (int k = 0; k < 3; ++k) {
    for (int j = 0; j < 3; ++j) EXPECT_EQ(x[k * 3 + j], d.x[idx[static_cast<size_t>(k)] * 3 + j]);
    for (int t = 0; t < 2; ++t) EXPECT_EQ(y[k * 2 + t], d.y[idx[static_cast<size_t>(k)] * 2 + t]);
  }
  const Dataset c = make_synthetic_classification(10, {2, 2}, 3, 1);
  gather_batch(c, std::vector<int64_t>{4}, x, y);
  EXPECT_EQ(x.shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(y.shape(), (Shape{1}));
  EXPECT_EQ(y[0], c.y[4]);
}

TEST(DdpSampler, EverySampleOncePerEpoch) {
  const int64_t n = 1003, batch = 16;
  for (int workers : {1, 3, 4}) {
    const int64_t g = workers * batch;
    for (uint32_t epoch = 0; epoch < 3; ++epoch) {
      const std::vector<int64_t> perm = global_permutation(n, 9, epoch);
      EXPECT_EQ(perm, global_permutation(n, 9, epoch));
      if (epoch > 0) {
        EXPECT_NE(perm, global_permutation(n, 9, epoch - 1));
      }
      const int64_t steps = ddp_steps_per_epoch(n, workers, batch);
      EXPECT_EQ(steps, (n + g - 1) / g);
      std::vector<int> seen(n, 0);
      for (int64_t s = 0; s < steps; ++s) {
        const int64_t m = std::min(g, n - s * g);
        for (int w = 0; w < workers; ++w) {
          const auto slice = ddp_worker_indices(perm, w, workers, batch, s);
          // DistributedSampler's strided split of the global batch; partial batch even.
          EXPECT_LE(std::abs(static_cast<int64_t>(slice.size()) - m / workers), 1);
          if (m == g) {
            EXPECT_EQ(static_cast<int64_t>(slice.size()), batch);
          }
          for (size_t k = 0; k < slice.size(); ++k) {
            EXPECT_EQ(slice[k],
                      perm[static_cast<size_t>(s * g + w + static_cast<int64_t>(k) * workers)]);
            ++seen[static_cast<size_t>(slice[k])];
          }
        }
      }
      EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
    }
  }
}

}  // namespace
}  // namespace syncopate
