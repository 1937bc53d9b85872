// Regression data: CSV column selection, skipped lines and quoted headers, the seeded test split,
// per-column scaling and its inverse, and the Friedman generator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/base/check.hpp"
#include "core/data/data.hpp"
#include "tests/common/scratch.hpp"
#include "tests/common/user_error.hpp"

namespace syncopate {
namespace {

namespace fs = std::filesystem;

std::string write_csv(const std::string& name, const std::string& text) {
  const std::string path = (scratch_folder("regression-data") / name).string();
  std::ofstream(path) << text;
  return path;
}

std::vector<float> values(const Tensor& t) { return {t.span().begin(), t.span().end()}; }

TEST(CsvColumns, SkippedLinesQuotedHeaderAndSelectedFeatures) {
  // Like sklearn's boston_house_prices.csv: a metadata line, then a quoted header.
  const std::string path = write_csv(
      "boston-like.csv", "3,2,,\n\"A\",\"B\",\"C\",\"Y\"\n1,2,3,10\n4,5,6,20\n7,8,9,30\n");
  CsvOptions options{.targets = {"Y"}, .features = {"C", "A"}, .skip_rows = 1};
  const Dataset d = load_csv_regression(path, options);
  EXPECT_EQ(d.x.shape(), (Shape{3, 2}));
  EXPECT_EQ(values(d.x), (std::vector<float>{3, 1, 6, 4, 9, 7}));
  EXPECT_EQ(values(d.y), (std::vector<float>{10, 20, 30}));
  // Without feature columns: every column but the targets, in file order.
  options.features.clear();
  EXPECT_EQ(load_csv_regression(path, options).x.shape(), (Shape{3, 3}));
  // Without skip_rows the metadata line is the header, and it has columns without names.
  options.skip_rows = 0;
  const std::string msg = error_of([&] { load_csv_regression(path, options); });
  EXPECT_NE(msg.find(path + ":1: header: column 3 has no name"), std::string::npos) << msg;
}

TEST(CsvColumns, UnknownOrDoubledColumnsAndUnreadColumnsMayHoldText) {
  const std::string path = write_csv("named.csv", "id,a,b,y\nfirst,1,2,3\nsecond,4,5,6\n");
  CsvOptions options{.targets = {"y"}, .features = {"a", "nope"}, .skip_rows = 0};
  std::string msg = error_of([&] { load_csv_regression(path, options); });
  EXPECT_NE(msg.find(path + ":1: feature column 'nope' not in the header; columns: id, a, b, y"),
            std::string::npos)
      << msg;
  options.features = {"a", "y"};
  msg = error_of([&] { load_csv_regression(path, options); });
  EXPECT_NE(msg.find("'y' is both a feature and a target"), std::string::npos) << msg;
  options.features = {"b", "a"};  // the text column "id" is never parsed
  EXPECT_EQ(values(load_csv_regression(path, options).x), (std::vector<float>{2, 1, 5, 4}));
  options.features = {"id"};
  msg = error_of([&] { load_csv_regression(path, options); });
  EXPECT_NE(msg.find(path + ":2: row 1, column 'id' (1): 'first' is not a finite number"),
            std::string::npos)
      << msg;
}

TEST(TestSplit, SeededDisjointAndInFileOrder) {
  Dataset all;
  all.name = "rows";
  const int64_t n = 50;
  all.x = Tensor({n, 1});
  all.y = Tensor({n, 1});
  for (int64_t i = 0; i < n; ++i) all.x[i] = all.y[i] = static_cast<float>(i);
  const auto [train, test] = split_test_rows(all, 0.2, 7);
  EXPECT_EQ(train.size(), 40);
  EXPECT_EQ(test.size(), 10);
  std::vector<float> rows = values(train.x);
  EXPECT_TRUE(std::is_sorted(rows.begin(), rows.end()));
  const std::vector<float> held = values(test.x);
  EXPECT_TRUE(std::is_sorted(held.begin(), held.end()));
  rows.insert(rows.end(), held.begin(), held.end());
  std::sort(rows.begin(), rows.end());
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(rows[static_cast<size_t>(i)], i);
  // Not the last fifth; the same for the same seed, another set for another seed.
  EXPECT_NE(held.front(), 40.0f);
  EXPECT_EQ(values(split_test_rows(all, 0.2, 7).second.x), held);
  EXPECT_NE(values(split_test_rows(all, 0.2, 8).second.x), held);
  EXPECT_EQ(split_test_rows(all, 1e-6, 7).second.size(), 1);  // at least one test row
}

TEST(Scaling, StandardAndMinMaxPerColumnFittedOnTrainAndInvertible) {
  Tensor v({4, 2}, {1, 10, 2, 10, 3, 10, 6, 10});  // column 1 is constant
  const Normalizer standard = fit_scaling(v, Scaling::kStandard);
  EXPECT_NEAR(standard.mean[0], 3.0, 1e-6);
  EXPECT_NEAR(standard.stddev[0], std::sqrt(3.5), 1e-6);
  EXPECT_EQ(standard.stddev[1], 1.0f);  // zero spread
  const Normalizer minmax = fit_scaling(v, Scaling::kMinMax);
  EXPECT_EQ(minmax.mean, (std::vector<float>{1, 10}));
  EXPECT_EQ(minmax.stddev, (std::vector<float>{5, 1}));
  std::vector<float> scaled = values(v);
  scale(minmax, scaled);
  EXPECT_EQ(scaled, (std::vector<float>{0, 0, 0.2f, 0, 0.4f, 0, 1, 0}));
  unscale(minmax, scaled);
  for (size_t i = 0; i < scaled.size(); ++i)
    EXPECT_NEAR(scaled[i], v[static_cast<int64_t>(i)], 1e-6);
  EXPECT_TRUE(fit_scaling(v, Scaling::kNone).mean.empty());

  // scale_split fits on the training set only and records the targets' scaling.
  Dataset train, test;
  train.x = Tensor({2, 1}, {0, 2});
  train.y = Tensor({2, 1}, {10, 30});
  test.x = Tensor({1, 1}, {4});
  test.y = Tensor({1, 1}, {50});
  scale_split(train, test, Scaling::kMinMax, Scaling::kStandard);
  EXPECT_EQ(test.x[0], 2.0f);  // (4 - 0) / 2
  EXPECT_EQ(test.y[0], 3.0f);  // (50 - 20) / 10
  EXPECT_EQ(test.target_scaling.mean, (std::vector<float>{20}));
}

TEST(SyntheticFriedman, DeterministicNonlinearAndOfThePapersShape) {
  const Dataset a = make_synthetic_friedman(100000, 8, 1, 5, 0.0);
  EXPECT_EQ(a.x.shape(), (Shape{100000, 8}));
  EXPECT_EQ(a.y.shape(), (Shape{100000, 1}));
  const Dataset b = make_synthetic_friedman(10, 8, 1, 5, 0.0);
  for (int64_t i = 0; i < 10 * 8; ++i) ASSERT_EQ(a.x[i], b.x[i]);  // a prefix of the larger
  for (int64_t i = 0; i < 10; ++i) ASSERT_EQ(a.y[i], b.y[i]);
  EXPECT_NE(make_synthetic_friedman(10, 8, 1, 6, 0.0).x[0], a.x[0]);
  // The formula at one sample.
  const float* x = a.x.data();
  const double pi = 3.14159265358979323846;
  double y = 10 * std::sin(pi * x[0] * x[1]) + 20 * (x[2] - 0.5) * (x[2] - 0.5) + 10 * x[3] +
             5 * x[4] + 2 * std::sin(2 * pi * x[5]) / 2 + 2 * std::sin(2 * pi * x[6]) / 3 +
             2 * std::sin(2 * pi * x[7]) / 4;
  EXPECT_NEAR(a.y[0], y, 1e-4);
  // Nonlinear: (x2 - 0.5)^2 is uncorrelated with x2, so y's correlation with x2 is near 0 although
  // it explains a part of y's variance.
  double sx = 0, sy = 0, sxy = 0, sxx = 0, syy = 0;
  const int64_t n = 20000;
  for (int64_t i = 0; i < n; ++i) {
    const double u = a.x[i * 8 + 2], v = a.y[i];
    sx += u, sy += v, sxy += u * v, sxx += u * u, syy += v * v;
  }
  const double cov = sxy / n - sx / n * sy / n;
  const double r = cov / std::sqrt((sxx / n - sx / n * sx / n) * (syy / n - sy / n * sy / n));
  EXPECT_LT(std::abs(r), 0.05);
  EXPECT_NE(error_of([] { make_synthetic_friedman(10, 4, 1, 5, 0.0); }).find("at least 5"),
            std::string::npos);
}

}  // namespace
}  // namespace syncopate
